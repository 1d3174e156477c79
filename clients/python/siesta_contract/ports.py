"""A sandbox's ports, reached through the service
(``/v1/conversations/{id}/ports/{port}/...``): how to open one in a browser."""

from __future__ import annotations

from pydantic import BaseModel

PORT_TOKEN_HEADER = "X-Siesta-Port-Token"


class PortAccessPublic(BaseModel):
    port: int
    path: str
    """Where the port answers on this service: ``/v1/conversations/{id}/ports/{port}/``."""
    url: str
    """``path`` on this service with ``?token=``: opens in a browser (the token is then
    kept in an HttpOnly cookie scoped to ``path``)."""
    token: str
    """Opens every port of this conversation's current sandbox, as the header
    ``X-Siesta-Port-Token``, a ``?token=`` or the cookie; it stops working when the
    sandbox is deleted or made afresh. Keep it as secret as the service's token."""
    header: str = PORT_TOKEN_HEADER
    listening: bool
    """Whether something listens on the port now."""
