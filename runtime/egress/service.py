"""Egress as the rest of the service sees it: a network for sandboxes and the proxy
environment for each command.

With no allowlist (the default) there is nothing to run: sandboxes have no
network and commands get no proxy. With one, the Docker provider puts sandboxes
on the deployment's internal network and this service starts the proxy on its
gateway; elsewhere (Kubernetes) the proxy runs apart at ``proxy_url``. Either proxy
reads the revocations deletions record in the service's store. What makes them is
in ``runtime.egress.build``, which reaches the Docker provider.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runtime.core.context import CallContext
from runtime.core.network_rules import Allowlist
from runtime.core.records import EgressRevocation
from runtime.egress.credentials import EgressClaims, sign
from runtime.egress.settings import EgressSettings
from runtime.images.build_network import BuildNetwork
from runtime.seams.provider_settings import ProviderSettings
from runtime.seams.stores import DeploymentStore, RevocationStore

NO_PROXY = "localhost,127.0.0.1,::1"
"""Servers a command starts inside its own sandbox are reached directly."""
BUILD_ORG = "siesta:image-builds"
"""Whom an image build's proxy credentials name (no org id has a colon), with the
version built as the conversation: the proxy logs and counts builds apart."""


Offered = Callable[[str, str], dict[str, str]]
"""A conversation's (org, id) variables for the secrets it is offered."""


class Egress:
    """No egress: no network, no proxy environment."""

    network: str | None = None
    """The Docker network sandboxes join (``None``: the provider's default)."""

    def environment(self, ctx: CallContext) -> dict[str, str]:
        return {}

    def build_network(self) -> BuildNetwork:
        """Where image builds' steps may reach: as sandboxes, here nowhere."""
        return BuildNetwork()

    def secrets(self) -> list[str]:
        """The key in the forms it is kept in, to mask in what the service shows."""
        return []

    def offer_secrets(self, offered: Offered) -> None:
        """Nothing to offer them through: no proxy."""

    def trust_pem(self) -> str | None:
        """The authority sandboxes must trust (PEM), where the proxy substitutes
        secrets in HTTPS requests; ``None``: none."""
        return None

    def close(self) -> None:
        pass


class ProxiedEgress(Egress):
    def __init__(
        self, allow: Allowlist, key: bytes, proxy_address: str, *, trust_pem: str | None = None
    ) -> None:
        self._allow = allow
        self._key = key
        self._proxy_address = proxy_address
        self._trust_pem = trust_pem
        self._offered: Offered = lambda org, conversation: {}

    def offer_secrets(self, offered: Offered) -> None:
        """Each command's environment gains ``offered(org, conversation)``: the
        placeholders of the secrets its conversation is offered."""
        self._offered = offered

    def environment(self, ctx: CallContext) -> dict[str, str]:
        """``HTTP(S)_PROXY`` (both spellings: curl and apt read the lower case, pip and
        npm either) with this conversation's signed credentials, issued now: ask for
        them under the conversation's lease, so a deletion revokes every earlier one.
        Then the placeholders of the secrets offered to the conversation."""
        proxy = self._proxy_environment(EgressClaims(ctx.org, ctx.conversation, ctx.egress_allow))
        return {**self._offered(ctx.org, ctx.conversation), **proxy}

    def trust_pem(self) -> str | None:
        return self._trust_pem

    def build_network(self) -> BuildNetwork:
        """The sandboxes' network and the proxy, with credentials for the version built
        (the deployment's allowlist, never narrowed nor widened). A proxy run apart with
        no Docker network of ours (``proxy_url``): builds get no network."""
        if self.network is None:
            return BuildNetwork()
        return BuildNetwork(
            self.network, lambda ref: self._proxy_environment(EgressClaims(BUILD_ORG, ref))
        )

    def secrets(self) -> list[str]:
        try:
            return [self._key.hex(), self._key.decode()]
        except UnicodeDecodeError:
            return [self._key.hex()]

    def _proxy_environment(self, claims: EgressClaims) -> dict[str, str]:
        user, password = sign(self._key, claims)
        url = f"http://{user}:{password}@{self._proxy_address}"
        env = {"HTTP_PROXY": url, "HTTPS_PROXY": url, "NO_PROXY": NO_PROXY}
        return {**env, **{name.lower(): value for name, value in env.items()}}


def revoke_credentials(
    store: RevocationStore, settings: EgressSettings, org: str, conversation: str
) -> None:
    """The conversation's credentials issued until now stop working at every proxy
    within ``revocation_poll_seconds`` (it is being deleted; its lease is held)."""
    revocation = EgressRevocation(org, conversation, time.time())
    store.revoke_egress(revocation, settings.revocation_retention_seconds)


def egress_key(settings: EgressSettings, store: DeploymentStore) -> bytes:
    if settings.key is not None:
        return settings.key.get_secret_value().encode()
    return bytes.fromhex(store.claim_egress_key(secrets.token_hex(32)))


@dataclass(frozen=True)
class EgressSetup:
    """What egress needs to know of the deployment's other settings."""

    egress: EgressSettings
    provider: ProviderSettings
    extra_labels: dict[str, str]
    """The sandboxes' labels (``SIESTA_SANDBOX__EXTRA_LABELS``), for the sandbox network."""
    store_url: str
    """Where the proxy reads revoked credentials (``store_url``)."""
    data_dir: Path
    """Where the deployment's egress authority is made when the operator gives none."""
