"""Settings every layer may read: tokens, HTTP, tracing, idempotency keys, the console."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from siesta_contract.text import ID_PATTERN

REPO_ROOT = Path(__file__).resolve().parents[2]


# A valid Kubernetes label value, so the same id can label pods.
DEPLOYMENT_ID_PATTERN = r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$"


DNS_LABEL_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"


QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$"


TOKEN_NAME_PATTERN = r"^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$"


SHA256_HEX_PATTERN = r"^[0-9a-f]{64}$"


LEGACY_TOKEN_NAME = "api-token"
"""The name ``SIESTA_API_TOKEN`` goes by (in logs and approvals)."""


Scope = Literal["sandbox", "shell", "tools", "approve", "admin"]
"""What a token may do: ``sandbox`` the conversation routes (sandbox, files, js,
delete), ``shell`` the programmatic surface a person or the backend drives (processes,
the terminal, the filesystem routes: still under the functions' policies and log, but
a token handed to model-driven calls need not have it), ``tools`` the tool catalog,
execute and executions log, ``approve`` deciding approvals, ``admin`` the operators'
routes (``/v1/admin/...``, and making, filling and deleting memory banks:
``/v1/memory-banks``, which ``tools`` may read)."""


SCOPES: tuple[Scope, ...] = ("sandbox", "shell", "tools", "approve", "admin")

ANY_ORG = "*"
"""``orgs: ["*"]``: a token that names the org per request (a trusted agent backend
serving many orgs), said explicitly."""


class IdempotencySettings(BaseModel):
    """Safe retries: what the ``Idempotency-Key`` header keeps, and for how long."""

    model_config = ConfigDict(extra="forbid")

    ttl_seconds: float = Field(24 * 3600.0, gt=0)
    """How long a key's answer is kept; a retry after it runs the request again."""
    wait_seconds: float = Field(30.0, ge=0)
    """How long a retry waits for the key's first request to finish before
    ``session_busy``."""
    hold_seconds: float = Field(30.0, gt=0)
    """A running request renews its claim on the key; when its instance dies the claim
    lapses after this long and a retry takes it over: a command is then collected
    from its sandbox, never started again (see "Safe retries" in docs/guides/agent-backends.md)."""
    max_response_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    """Largest answer kept; a larger one is not (``Idempotency-Kept: false``), and a
    retry with its key gets ``idempotency_result_not_kept`` instead of a second run."""


class TokenSettings(BaseModel):
    """One caller's bearer token, kept as the SHA-256 digest of the token
    (``siesta-runtime tokens hash``), never the token itself."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=TOKEN_NAME_PATTERN)
    """Who the caller is, in logs and in approvals (``backend``, ``approver-ui``)."""
    sha256: Annotated[str, BeforeValidator(lambda v: v.lower() if isinstance(v, str) else v)] = (
        Field(pattern=SHA256_HEX_PATTERN)
    )
    """Hex SHA-256 of the token's UTF-8 bytes."""
    scopes: list[Scope] = Field(min_length=1)
    org: str | None = Field(None, pattern=ID_PATTERN)
    """The one org this token acts in, on every face: ``/v1`` refuses another
    ``X-Siesta-Org`` (403 ``org_not_allowed``) and takes this one when the header is
    absent; the E2B API makes and sees this org's sandboxes."""
    orgs: list[Annotated[str, Field(pattern=rf"{ID_PATTERN}|^\*$")]] | None = Field(
        None, min_length=1
    )
    """The orgs this token may name per request (``X-Siesta-Org``), or ``["*"]``: any.
    Left out with ``org`` left out too: any org, as ``["*"]`` (the E2B API then uses
    ``SIESTA_E2B__DEFAULT_ORG``)."""
    user: str | None = Field(None, pattern=ID_PATTERN)
    """The one user this token acts for: another ``X-Siesta-User`` is refused (403
    ``user_not_allowed``), an absent one is this."""

    @model_validator(mode="after")
    def _one_org_form(self) -> TokenSettings:
        if self.org is not None and self.orgs is not None:
            msg = f"token {self.name!r}: give either org (one) or orgs (a list), not both"
            raise ValueError(msg)
        if self.orgs is not None and ANY_ORG in self.orgs and len(self.orgs) > 1:
            msg = f'token {self.name!r}: orgs is either ["*"] or a list of org ids'
            raise ValueError(msg)
        return self


class HttpSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    """Address ``serve`` listens on (``--host`` overrides it); the service image uses 0.0.0.0."""
    port: int = Field(8080, ge=1, le=65535)
    """Port ``serve`` listens on (``--port`` overrides it)."""
    max_request_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    """Largest JSON request body accepted (uploads have their own limit)."""
    worker_threads: int = Field(64, ge=4)
    """Sandbox calls that can run at once in one process (each holds a thread)."""
    idle_connection_seconds: int = Field(75, ge=1)
    """How long a kept-alive client connection may sit idle before the service closes
    it. Longer than the idle timeout of the proxies and load balancers in front (60 s
    is common): a server that closes first races the next request sent on the same
    connection, which then fails with no answer (uvicorn's own default is 5 s)."""
    sse_keepalive_seconds: float = Field(15.0, gt=0)
    """A streamed answer that has sent nothing for this long sends an SSE comment
    (``: keepalive``), so that proxies with an idle timeout (nginx: 60 s) keep it open
    while a command is silent."""
    drain_seconds: float | None = Field(None, gt=0)
    """After SIGTERM, how long ``serve`` goes on serving while ``/readyz`` answers 503
    ``draining``: it stops as soon as no request is in flight (streams and terminals
    count until they end), at the latest after this. Default:
    ``SIESTA_COMMAND__MAX_TIMEOUT_SECONDS`` plus ``__KILL_GRACE_SECONDS`` plus 5 s, so a
    command started just before SIGTERM finishes and answers. Kubernetes'
    ``terminationGracePeriodSeconds`` must be longer."""


DOMAIN_PATTERN = r"^[A-Za-z0-9-]{1,63}(\.[A-Za-z0-9-]{1,63})*$"
"""A DNS name: labels of letters, digits and hyphens."""


class ConsoleSettings(BaseModel):
    """The operators' web console at ``/console`` (tokens with the ``admin`` scope)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """False: ``/console`` is not served at all."""
    session_hours: float = Field(8.0, gt=0, le=24 * 30)
    """How long a console sign-in lasts; signing out, or the token leaving the
    configuration, ends it sooner."""
    host: str | None = Field(None, pattern=DOMAIN_PATTERN)
    """The console's own host name (``console.example.com``): ``/console`` then
    answers only requests whose ``Host`` names it (any port), 421
    ``console_wrong_host`` elsewhere, so no other page on the API's origin shares its
    origin. ``None``: any host but a preview's."""


class TracingSettings(BaseModel):
    """Where spans go. The W3C trace context a caller sends is passed on to upstream
    APIs and the agent gateway whatever is chosen here."""

    model_config = ConfigDict(extra="forbid")

    exporter: Literal["none", "otlp", "console"] = "none"
    """``none``: nothing is recorded; ``otlp``: OTLP over HTTP (needs the ``otlp``
    extra: ``pip install 'siesta-runtime[otlp]'``); ``console``: JSON on stdout."""
    otlp_endpoint: str | None = None
    """The collector's traces URL (``http://collector:4318/v1/traces``); default:
    the exporter's own (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or localhost)."""
    service_name: str = "siesta-runtime"
    """``service.name`` of every span."""
    sample_ratio: float = Field(1.0, ge=0.0, le=1.0)
    """Share of new traces recorded; a caller's sampling decision is always followed."""


def without(data: dict[str, Any], *names: str) -> dict[str, Any]:
    """``data`` without the keys ``names`` (a tagged union's other variants' fields)."""
    return {k: v for k, v in data.items() if k not in names}
