"""An org's secrets (``X-Siesta-Org``) for the egress proxy to put in requests in place
of their placeholders (``runtime/sandbox/secrets.py``). The ``admin`` scope: a secret is
the org's configuration, set by an operator or the agent backend, never by a model.
A value goes in and is never returned: answers say its name, size and times only.
Another org's secrets answer 404 ``secret_not_found``, as if they did not exist.
"""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter, Path, Request, Response

from siesta_contract.secrets import SECRET_NAME, SecretPublic, SecretPut, SecretsPublic

from api import audit
from api.deps import CallerDep, OrgDep, ServicesDep, requires
from api.responses import COMMON, error_responses
from runtime.core.records import SealedSecret

router = APIRouter(
    prefix="/v1/secrets",
    tags=["secrets"],
    dependencies=requires("admin"),
    responses=error_responses(*COMMON, 404, 409),
)
Name = Path(pattern=SECRET_NAME)


@router.get("")
async def list_secrets(services: ServicesDep, org: OrgDep) -> SecretsPublic:
    """The org's secrets by name: never their values."""
    found = await to_thread.run_sync(lambda: services.secrets.list(org))
    return SecretsPublic(secrets=[public(secret) for secret in found])


@router.put("/{name}")
async def put_secret(
    body: SecretPut,
    services: ServicesDep,
    caller: CallerDep,
    request: Request,
    org: OrgDep,
    name: str = Name,
) -> SecretPublic:
    """Set the secret (or replace its value: sandboxes offered it get the new one within
    ``SIESTA_EGRESS__NETWORK_RULES_CACHE_SECONDS``). 409 ``secrets_not_configured``
    without ``SIESTA_EGRESS__SECRETS_KEY``, ``secret_limit_reached`` at
    ``SIESTA_EGRESS__MAX_SECRETS_PER_ORG``; 422 ``invalid_secret`` past
    ``SIESTA_EGRESS__MAX_SECRET_BYTES``."""

    def put() -> SealedSecret:
        secret = services.secrets.put(org, name, body.value, body.hosts, body.header)
        audit.record(services, caller, request, "secret.put", f"{org}/{name}", size=secret.size)
        return secret

    return public(await to_thread.run_sync(put))


@router.get("/{name}")
async def get_secret(services: ServicesDep, org: OrgDep, name: str = Name) -> SecretPublic:
    return public(await to_thread.run_sync(lambda: services.secrets.get(org, name)))


@router.delete("/{name}", status_code=204)
async def delete_secret(
    services: ServicesDep, caller: CallerDep, request: Request, org: OrgDep, name: str = Name
) -> Response:
    """Forget it: proxies stop substituting it within
    ``SIESTA_EGRESS__NETWORK_RULES_CACHE_SECONDS``; placeholders stay placeholders."""

    def delete() -> None:
        services.secrets.delete(org, name)
        audit.record(services, caller, request, "secret.delete", f"{org}/{name}")

    await to_thread.run_sync(delete)
    return Response(status_code=204)


def public(secret: SealedSecret) -> SecretPublic:
    return SecretPublic(
        name=secret.name,
        size=secret.size,
        hosts=list(secret.hosts),
        header=secret.header,
        createdAt=secret.created_at,
        updatedAt=secret.updated_at,
    )
