"""Errors of a sandbox's ports.

SiestaError
├── PortNotListening           port_not_listening (port): 502
├── PortConnectionLost         port_connection_lost (port): 502
│   └── PortMessageTooLarge    port_message_too_large (port, limit): a WebSocket closed 1009
├── NotFound
│   ├── PortSandboxMissing     port_sandbox_not_found: the conversation has no sandbox
│   └── PreviewHostUnknown     preview_host_unknown: a name under the preview domain
│                              that is no port's
├── CapacityUnavailable
│   └── TooManyPortConnections too_many_port_connections (limit): 503
└── Unauthorized
    └── PortTokenRefused       unauthorized: no valid port token (nor bearer token)
"""

from __future__ import annotations

from runtime.core.errors import CapacityUnavailable, NotFound, SiestaError, Unauthorized


class PortNotListening(SiestaError):
    code = "port_not_listening"


class PortConnectionLost(SiestaError):
    code = "port_connection_lost"


class PortMessageTooLarge(PortConnectionLost):
    """A WebSocket message from the sandbox over its limit: the socket closes with 1009."""

    code = "port_message_too_large"


class PortSandboxMissing(NotFound):
    code = "port_sandbox_not_found"


class PreviewHostUnknown(NotFound):
    code = "preview_host_unknown"


class TooManyPortConnections(CapacityUnavailable):
    code = "too_many_port_connections"


class PortTokenRefused(Unauthorized):
    """Same code as a missing bearer token: clients handle both alike."""
