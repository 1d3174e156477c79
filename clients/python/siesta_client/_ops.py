"""Each call as data (method, path, body, how to read the answer), shared by the
sync and async clients; and the answer's reading, errors included."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

import httpx
from pydantic import BaseModel

from siesta_client.errors import SiestaError, error_from

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
Abandoned = Literal["stopped", "finishes"]
"""What the service does with a call whose caller closes the connection before the
answer: ``stopped`` (a command's processes are killed), or ``finishes`` it."""


@dataclass(frozen=True)
class Context:
    """Who a conversation's calls are for: the ``X-Siesta-*`` headers."""

    org: str
    user: str | None = None
    base_image: str | None = None
    agent: str | None = None
    sub_agents: tuple[str, ...] | None = None

    def headers(self) -> dict[str, str]:
        found = {
            "X-Siesta-Org": self.org,
            "X-Siesta-User": self.user,
            "X-Siesta-Base-Image": self.base_image,
            "X-Siesta-Agent": self.agent,
        }
        headers = {name: value for name, value in found.items() if value}
        if self.sub_agents is not None:
            headers["X-Siesta-Sub-Agents"] = ",".join(self.sub_agents)
        return headers


@dataclass(frozen=True)
class Op(Generic[T]):
    method: str
    path: str
    read: Callable[[httpx.Response], T]
    headers: Mapping[str, str] = field(default_factory=dict)
    json: Any = None
    files: Any = None
    params: Mapping[str, Any] | None = None
    body: type[BaseModel] | None = None
    """The contract model ``json`` follows (the route's request body in the OpenAPI)."""
    runs_for: float | None = None
    """How long the call may run on the service (a command's or a script's timeout):
    the client waits that much longer for its answer than its own read timeout."""
    abandoned: Abandoned = "finishes"
    events: Callable[[str, Any], None] | None = None
    """Asks for the answer as server-sent events: each event before the last (a
    command's ``output``, a script's ``status``) is handed here as it comes."""


@dataclass(frozen=True)
class Model(Generic[M]):
    """Reads a JSON answer into a contract model."""

    cls: type[M]

    def __call__(self, response: httpx.Response) -> M:
        return self.cls.model_validate(response.json())


def model(cls: type[M]) -> Model[M]:
    return Model(cls)


def raw_bytes(response: httpx.Response) -> bytes:
    return response.content


def no_content(response: httpx.Response) -> None:
    """An answer with nothing to read (204)."""


def raise_for_error(response: httpx.Response) -> None:
    """An error answer (4xx/5xx, or 202 holding the call for approval) as an exception."""
    if response.status_code < 400 and response.status_code != 202:
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        raise error_from(response.status_code, error)
    if response.status_code >= 400:
        text = response.text[:500]
        raise SiestaError(text, code="http_error", status=response.status_code)


def args(model_cls: type[BaseModel], **values: Any) -> dict[str, Any]:
    """A body checked by its contract model, without unset fields (wire names)."""
    given = {name: value for name, value in values.items() if value is not None}
    checked = model_cls.model_validate(given)
    return checked.model_dump(mode="json", by_alias=True, exclude_unset=True)


class Caller(Protocol):
    """What a resource class (``client.agents``, ``client.memory_banks``) needs of its
    sync client: a call sent, with its retries."""

    def call(self, op: Op[T], idempotency_key: str | None = None) -> T: ...


class AsyncCaller(Protocol):
    """The same, of the async client."""

    async def call(self, op: Op[T], idempotency_key: str | None = None) -> T: ...
