"""The service's own page fetches connect to the address they checked, nothing else."""

from __future__ import annotations

import ipaddress

import httpx
import pytest

from runtime.core.addresses import IpAddress
from runtime.egress.outbound import AddressRefused, CheckedBackend, checked_transport


class RebindingResolver:
    """Answers ``first`` once, then ``later`` for ever (a DNS-rebinding attacker)."""

    def __init__(self, first: str, later: str) -> None:
        self.answers = [first, later]
        self.calls = 0

    def __call__(self, host: str, port: int) -> list[IpAddress]:
        self.calls += 1
        return [ipaddress.ip_address(self.answers[min(self.calls - 1, 1)])]


def client(resolver: RebindingResolver, *, allow_private: bool) -> httpx.Client:
    backend = CheckedBackend(allow_private=allow_private, resolve=resolver)
    return httpx.Client(transport=checked_transport(backend), timeout=2)


def test_the_connection_goes_to_the_address_that_was_resolved_once(origin: int) -> None:
    resolver = RebindingResolver("127.0.0.1", "10.255.255.1")
    with client(resolver, allow_private=True) as http:
        response = http.get(f"http://rebind.test:{origin}/")
    assert response.text.endswith(" local=127.0.0.1")
    assert resolver.calls == 1


def test_a_name_on_a_private_address_is_refused_at_connect(origin: int) -> None:
    resolver = RebindingResolver("127.0.0.1", "127.0.0.1")
    with client(resolver, allow_private=False) as http, pytest.raises(AddressRefused) as caught:
        http.get(f"http://looks-public.test:{origin}/")
    assert "loopback address (127.0.0.1)" in str(caught.value)


def test_a_rebinding_name_never_reaches_the_private_address(origin: int) -> None:
    """Checked as public, then rebound to loopback: the connection still goes to the
    public address it checked (unreachable here), so the local server is never hit."""
    resolver = RebindingResolver("192.0.2.1", "127.0.0.1")  # TEST-NET-1: routes nowhere
    backend = CheckedBackend(allow_private=False, resolve=resolver)
    with (
        httpx.Client(transport=checked_transport(backend), timeout=0.5) as http,
        pytest.raises(httpx.TransportError),
    ):
        http.get(f"http://rebind.test:{origin}/")
    assert resolver.calls == 1
