"""Settings of the E2B-compatible API (``SIESTA_E2B__*``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from siesta_contract.text import ID_PATTERN

from runtime.core.settings import DOMAIN_PATTERN


class E2bSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Serve ``/e2b`` (the control plane) and ``/e2b/envd`` (the in-sandbox API)."""
    default_org: str = Field("default", pattern=ID_PATTERN)
    """The org of E2B sandboxes made with a token that names none (``SIESTA_API_TOKEN``,
    or a scoped token without ``org``)."""
    default_timeout_seconds: int = Field(300, ge=1)
    """A sandbox's timeout when create gives none (E2B's default)."""
    max_timeout_seconds: int = Field(24 * 3600, ge=1)
    """The longest timeout create, connect or set-timeout may ask for (larger: capped)."""
    default_user: str = Field("user", pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    """Who processes and file operations run as when a call names no user (E2B's
    default; the ``base`` image has it). ``root`` is always there."""
    envd_version: str = "0.6.4"
    """The envd version sandboxes report: the SDKs enable features by it (0.6.4: octet
    stream uploads, close_stdin, file metadata (0.6.2), watch events with their entries
    (0.6.3) and watching network mounts on request (0.6.4) all on)."""
    keepalive_seconds: float = Field(50.0, gt=0)
    """A process stream that sent nothing this long sends a keepalive (the SDK's
    Keepalive-Ping-Interval header, when given, wins)."""
    max_upload_bytes: int = Field(1024 * 1024 * 1024, ge=1024)
    """The largest file ``POST /files`` takes."""
    sweep_interval_seconds: float = Field(1.0, gt=0)
    """How often the service looks for sandboxes whose timeout passed."""
    ports_domain: str | None = Field(None, pattern=DOMAIN_PATTERN)
    """The domain of sandboxes' ports, E2B's form ``PORT-SANDBOXID.DOMAIN`` (the SDK's
    ``get_host``): create and connect answer it as ``domain``, and a request whose
    ``Host`` has that form is forwarded to the port. Point a wildcard DNS name
    (``*.DOMAIN``) at the service. ``None``: no host form (the SDK then builds its
    hosts on its own ``E2B_DOMAIN``)."""
