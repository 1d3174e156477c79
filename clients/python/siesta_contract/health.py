"""What the probes read: liveness and readiness."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from siesta_contract.errors import ErrorBody


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    ready: bool
    checks: dict[str, Literal["ok"] | ErrorBody]
    """Each dependency (``store``, ``provider``): ``ok``, or the error it answered with;
    after SIGTERM only ``draining`` (the instance finishes what it serves, then stops)."""
