"""Python client for Siesta Runtime: ``SiestaClient`` (sync) and ``AsyncSiestaClient``.

    with SiestaClient("http://127.0.0.1:8080", token) as siesta:  # or SIESTA_URL, SIESTA_API_TOKEN
        conv = siesta.conversation("conv-1", org="acme", user="u1", base_image="debian-base")
        print(conv.run_command("echo hello").stdout)

Arguments and results are the public contract's models (``siesta_contract``); error
answers raise ``SiestaError`` subclasses (``siesta_client.errors``).
``__version__`` is the installed distribution's (``siesta-client``).
"""

from __future__ import annotations

from siesta_client._follow import OutputGap, ProcessEnded, ProcessEvent, ProcessOutput
from siesta_client._retry import Retries
from siesta_client._terminal import Terminal, TerminalExit
from siesta_client._version import version
from siesta_client.aio import AsyncConversation, AsyncSiestaClient, AsyncTools
from siesta_client.client import Conversation, SiestaClient, Tools
from siesta_client.errors import (
    ApprovalRequired,
    ClientTimeout,
    Conflict,
    ConnectionFailed,
    Forbidden,
    IdempotencyKeyReused,
    InvalidRequest,
    LimitError,
    NotFound,
    OutcomeUnknown,
    SessionBusy,
    SiestaError,
    Unauthorized,
    Unavailable,
)

__version__ = version()

__all__ = [
    "ApprovalRequired",
    "AsyncConversation",
    "AsyncSiestaClient",
    "AsyncTools",
    "ClientTimeout",
    "Conflict",
    "ConnectionFailed",
    "Conversation",
    "Forbidden",
    "IdempotencyKeyReused",
    "InvalidRequest",
    "LimitError",
    "NotFound",
    "OutcomeUnknown",
    "OutputGap",
    "ProcessEnded",
    "ProcessEvent",
    "ProcessOutput",
    "Retries",
    "SessionBusy",
    "SiestaClient",
    "SiestaError",
    "Terminal",
    "TerminalExit",
    "Tools",
    "Unauthorized",
    "Unavailable",
]
