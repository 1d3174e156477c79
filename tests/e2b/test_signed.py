"""Signed file URLs without a sandbox: the signature is the SDK's own, and an unsigned
crowd of URLs cannot make the service read every sandbox per request."""

from __future__ import annotations

import pytest
from e2b.sandbox.signature import get_signature

from api.e2b.errors import E2bRefusal
from api.e2b.signed import RecentSandboxes, signature, signed_by
from runtime.core.records import E2bSandbox


def sandbox(sandbox_id: str, token: str) -> E2bSandbox:
    return E2bSandbox("org", sandbox_id, "owner", "base", token, 0.0, 10.0**10)


def test_the_signature_is_the_sdks() -> None:
    for operation in ("read", "write"):
        for user in ("user", None):
            for seconds in (None, 120):
                theirs = get_signature("a/b.txt", operation, user, "tok", seconds)
                ours = signature("a/b.txt", operation, user or "", "tok", theirs["expiration"])
                assert ours == theirs["signature"]
    signed = get_signature("p", "write", "user", "secret")["signature"]
    query = {"path": "p", "username": "user", "signature": signed}
    found = signed_by("POST", query, [sandbox("one", "other"), sandbox("two", "secret")])
    assert found is not None and found.sandbox_id == "two"
    assert signed_by("GET", query, [sandbox("two", "secret")]) is None  # for writing only


def test_an_expired_url_is_refused_whatever_its_signature() -> None:
    query = {"path": "p", "signature": "v1_x", "signature_expiration": "100"}
    with pytest.raises(E2bRefusal, match="signature is already expired") as refused:
        signed_by("GET", query, [], clock=lambda: 200.0)
    assert refused.value.status == 401


def test_misses_read_the_sandboxes_at_most_once_per_refresh() -> None:
    loads: list[int] = []
    listed = [sandbox("one", "t1")]

    def load() -> list[E2bSandbox]:
        loads.append(1)
        return list(listed)

    def named(wanted: str):  # type: ignore[no-untyped-def]
        return lambda found: next((s for s in found if s.sandbox_id == wanted), None)

    recent = RecentSandboxes(refresh_seconds=60)
    assert recent.find(load, named("one")) is not None  # first: read
    for _ in range(100):  # a crowd of forged URLs: no more reads
        assert recent.find(load, named("forged")) is None
    assert len(loads) == 1
    listed.append(sandbox("two", "t2"))
    fresh = RecentSandboxes(refresh_seconds=0)
    assert fresh.find(load, named("two")) is not None  # a new sandbox is found
