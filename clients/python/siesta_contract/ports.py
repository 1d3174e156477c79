"""A sandbox's ports, reached through the service
(``/v1/conversations/{id}/ports/{port}/...``): how to open one in a browser."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

PORT_TOKEN_HEADER = "X-Siesta-Port-Token"


class PortAccessPublic(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    port: int
    path: str
    """Where the port answers on this service: ``/v1/conversations/{id}/ports/{port}/``
    (for API clients: a browser gets its pages inert, with no script)."""
    url: str
    """``path`` on this service with ``?token=`` (sets no cookie)."""
    token: str
    """Opens every port of this conversation's current sandbox on ``path``, as the
    header ``X-Siesta-Port-Token`` or a ``?token=``; it stops working when the sandbox is
    deleted or made afresh. Keep it as secret as the service's token."""
    preview_url: str | None = Field(None, alias="previewUrl")
    """Where a browser opens the port: its own origin under the deployment's preview
    domain, with the preview token (kept in a cookie of that host only). ``None``: the
    deployment has no preview domain."""
    header: str = PORT_TOKEN_HEADER
    listening: bool
    """Whether something listens on the port now."""
