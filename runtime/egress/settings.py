"""Settings of the egress allowlist and proxy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    IPvAnyAddress,
    IPvAnyNetwork,
    SecretStr,
)
from pydantic_settings import NoDecode

from runtime.core.network_rules import Allowlist


def _entries(value: Any) -> Any:
    """A comma-separated string (handy in env files), a JSON list, or a list."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        return json.loads(value)
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _checked_allowlist(entries: list[str]) -> list[str]:
    Allowlist.parse(entries)  # raises ValueError naming the bad entry
    return entries


# NoDecode: the environment gives the raw text (``a.org,b.org``), not JSON.
HostList = Annotated[
    list[str], NoDecode, BeforeValidator(_entries), AfterValidator(_checked_allowlist)
]


class EgressSettings(BaseModel):
    """The only way out of a sandbox: an HTTP(S) proxy that checks every request.

    Empty ``allow`` (the default) means sandboxes have no network at all. With
    hosts listed, sandboxes join an internal network with no route out, and every
    command gets ``HTTP_PROXY``/``HTTPS_PROXY`` pointing at the proxy.
    """

    model_config = ConfigDict(extra="forbid")

    allow: HostList = Field(default_factory=list)
    """Hosts sandboxes may reach, e.g. ``deb.debian.org,*.pypi.org,files.pythonhosted.org``
    (``*.suffix`` for names below a domain; ``:port`` for other ports than 80 and 443),
    and addresses or CIDR ranges (``1.1.1.1``, ``203.0.113.0/24:8443``), matched against
    where a connection goes. An agent may narrow this list, never widen it."""
    proxy_port: int = Field(3128, ge=1, le=65535)
    """Docker: the port the proxy listens on, on the sandbox network's gateway."""
    proxy_url: str | None = None
    """An egress proxy run apart from the service (Kubernetes: the siesta-egress
    Service). The service starts none; its host name is resolved here once, so
    sandboxes need no DNS."""
    key: SecretStr | None = Field(None, min_length=32)
    """Signs sandboxes' proxy credentials; a separately run proxy needs the same one.
    Default: made once and kept in the store."""
    hosts: dict[str, IPvAnyAddress] = Field(default_factory=dict)
    """Names the proxy answers without DNS (like /etc/hosts), still checked like any
    address, e.g. ``{"mirror.internal": "10.1.2.3"}``."""
    allowed_private_networks: list[IPvAnyNetwork] = Field(default_factory=list)
    """Private ranges the proxy may connect to (an internal mirror); the loopback and
    metadata addresses stay refused unless listed (metadata: always)."""
    connect_timeout_seconds: float = Field(10.0, gt=0)
    idle_timeout_seconds: float = Field(300.0, gt=0)
    """A proxied connection with no traffic either way for this long is closed."""
    max_connections: int = Field(256, ge=1)
    """Connections one proxy carries at once; more are answered 503."""
    max_connections_per_conversation: int = Field(64, ge=1)
    """Connections one sandbox may have open through one proxy (503 past it), so that
    no sandbox takes the proxy from the others."""
    revocation_retention_seconds: float = Field(7 * 24 * 3600.0, gt=0)
    """Deleting a conversation revokes its credentials; the revocation is kept this
    long (in the store and in each proxy). Credentials older than this are refused
    (``credentials_expired``), so a revocation can go once nothing it revokes could
    still be accepted. Each command gets fresh credentials: only a process that
    outlives the command that started it by more than this loses egress."""
    revocation_poll_seconds: float = Field(5.0, gt=0)
    """How often each proxy reads new revocations from the store: a deleted
    conversation's credentials stop working within this."""

    network_rules_cache_seconds: float = Field(2.0, gt=0)
    """How long a proxy keeps a conversation's own network rules before it reads them
    again: rules set on a running sandbox apply to its connections within this."""
    refusal_retention_seconds: float = Field(24 * 3600.0, gt=0)
    """A conversation's count of refused requests (its sandbox's ``egressRefusals``) is
    forgotten this long after its last refusal."""

    secrets_key: SecretStr | None = Field(None, min_length=32)
    """Seals orgs' secrets (``/v1/secrets``) in the store; the proxy opens them with it
    (a proxy run apart needs the same one). Unset: the secrets API answers 409
    ``secrets_not_configured``. Losing it loses the secrets (set them again)."""
    max_secrets_per_org: int = Field(100, ge=1, le=10_000)
    max_secret_bytes: int = Field(4096, ge=1, le=65536)
    """A secret's value goes into a request header: header-sized."""
    ca_cert_file: Path | None = None
    """The deployment's certificate authority (PEM) the proxy signs hosts' certificates
    with when it substitutes secrets in HTTPS requests; sandboxes trust it. Unset: one
    is made in the data folder at the first start (several instances on several hosts
    must share one: set this and ``ca_key_file``)."""
    ca_key_file: Path | None = None
    upstream_ca_file: Path | None = None
    """Certificates (PEM) the proxy trusts for the real servers beside the system's,
    when it re-encrypts a request it substituted a secret in (an internal CA)."""

    @property
    def substitutes_secrets(self) -> bool:
        return self.enabled and self.secrets_key is not None

    @property
    def enabled(self) -> bool:
        return bool(self.allow)
