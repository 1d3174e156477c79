"""Settings of a sandbox's ports (``SIESTA_PORTS__*``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.settings import DOMAIN_PATTERN


class PortsSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_connections_per_sandbox: int = Field(64, ge=1, le=100)
    """Connections open at once to one sandbox's ports, through this instance. Each is a
    process in the sandbox's agent, which runs at most 128 requests at once (commands,
    processes, file operations and connections together): the rest is kept for them."""
    connection_buffer_bytes: int = Field(16 * 1024 * 1024, ge=64 * 1024)
    """What a connection's server may send ahead of its client: a client that reads
    slower than that is cut off (the agent's channel is shared, it cannot wait)."""
    early_buffer_bytes: int = Field(1024 * 1024, ge=4096)
    """What a connection keeps of what comes from its port before the sandbox says the
    connection opened (a server that speaks first says little): past it the connection
    is cut, as nothing reads it yet."""
    max_websocket_message_bytes: int = Field(16 * 1024 * 1024, ge=64 * 1024)
    """Largest WebSocket message (or refusal body) taken from a server in a sandbox: the
    service holds a message whole before relaying it; past it the socket is closed
    (1009, naming the limit)."""
    connect_timeout_seconds: float = Field(10.0, gt=0)
    """How long a connection may take to open inside the sandbox."""
    idle_timeout_seconds: float = Field(300.0, gt=0)
    """A connection through which nothing passed this long is closed."""
    token_cookie: str = Field("siesta_port_token", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The cookie a preview's ``?token=`` sets (HttpOnly, on the preview's host only)."""
    preview_domain: str | None = Field(None, pattern=DOMAIN_PATTERN)
    """The domain of previews in a browser: port P of a conversation answers at
    ``P-LABEL.DOMAIN``, an origin of its own (LABEL: 24 letters derived from org and
    conversation with the deployment's secret). Point a wildcard DNS name (``*.DOMAIN``)
    at the service; it must not be the API's or the console's host nor hold them (no
    host under it reaches the API or the console). ``None``: no host form, and the path
    form (inert in a browser) is the only way to a port."""
