"""An org's secrets (``/v1/secrets``) and how a conversation's sandbox is offered one
(``secrets`` in its network rules): the sandbox sees a placeholder, the egress proxy
puts the value in its place in requests to the hosts named, and nowhere else."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from siesta_contract.text import EGRESS_ENTRY

SECRET_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
SECRET_VALUE = r"^[\x20-\x7e]+$"
"""What an HTTP header value may hold (visible ASCII and space): a value goes there."""
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$"
"""An HTTP header name (RFC 9110 token)."""
MAX_BINDINGS = 16
MAX_SECRET_HOSTS = 32

SecretName = Annotated[str, Field(pattern=SECRET_NAME)]


HostEntry = Annotated[str, Field(pattern=f"^{EGRESS_ENTRY}$", max_length=300)]


class SecretPut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    value: Annotated[str, Field(min_length=1, max_length=65536, pattern=SECRET_VALUE)]
    """Sealed at once; never returned, logged or put in a sandbox. At most
    ``SIESTA_EGRESS__MAX_SECRET_BYTES`` (4096) bytes."""
    hosts: Annotated[list[HostEntry], Field(min_length=1, max_length=MAX_SECRET_HOSTS)]
    """The only hosts the proxy puts it in a request to (allowlist entries): a
    placeholder sent anywhere else arrives as it is, useless. The secret's, not a
    conversation's: offering it to a sandbox cannot send it elsewhere."""
    header: Annotated[str, Field(pattern=HEADER_NAME)] = "Authorization"
    """The request header in which its placeholder is replaced (anywhere in the value:
    ``Bearer $TOKEN`` works)."""


class SecretPublic(BaseModel):
    name: str
    size: int
    """The value's length in bytes: all that is ever shown of it."""
    hosts: list[str]
    header: str
    createdAt: float
    updatedAt: float


class SecretsPublic(BaseModel):
    secrets: list[SecretPublic]


class SecretBindingSpec(BaseModel):
    """One of the org's secrets offered to the sandbox."""

    model_config = ConfigDict(extra="forbid")

    secret: SecretName
    """The org's secret (``PUT /v1/secrets/{name}``, which says where it may go)."""
    env: Annotated[str, Field(pattern=ENV_NAME)]
    """The environment variable its commands see, holding a placeholder."""


class SecretBindingPublic(SecretBindingSpec):
    placeholder: str
    """What ``env`` holds in the sandbox: worthless anywhere but through the proxy, to
    the secret's hosts, from this conversation's sandbox."""
