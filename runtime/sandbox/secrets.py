"""An org's secrets for the egress proxy to substitute: kept sealed, never shown, and
offered to a conversation's sandbox only as placeholders (its network rules'
``secrets``).

A secret's value goes into an HTTP header, so it is visible ASCII, at most
``SIESTA_EGRESS__MAX_SECRET_BYTES``; an org keeps at most
``SIESTA_EGRESS__MAX_SECRETS_PER_ORG``. The value leaves this module only sealed
(``runtime/egress/sealing.py``): it is not in any answer, log line, audit entry,
executions log, approval or snapshot.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from siesta_contract.secrets import HEADER_NAME, SECRET_NAME, SECRET_VALUE

from runtime.core.errors import InvalidRequest, NotFound, SiestaError
from runtime.core.network_rules import HeaderSet, SecretBinding, parse_rule
from runtime.core.records import SealedSecret
from runtime.egress.placeholders import placeholder
from runtime.egress.sealing import SecretSealer
from runtime.egress.settings import EgressSettings
from runtime.seams.stores import NetworkRuleStore

RESERVED_ENV = frozenset(
    {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "PATH", "HOME", "USER", "SHELL"}
    | {"REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "PIP_CERT"}
)
"""What the service puts in a command's environment itself (either case)."""


class SecretsNotConfigured(SiestaError):
    code = "secrets_not_configured"


class SecretNotFound(NotFound):
    code = "secret_not_found"


class SecretLimitReached(SiestaError):
    code = "secret_limit_reached"


class InvalidSecret(InvalidRequest):
    code = "invalid_secret"


@dataclass(frozen=True)
class SecretSpec:
    """A binding as a request gives it (``SecretBindingSpec``)."""

    secret: str
    env: str


class OrgSecrets:
    def __init__(
        self,
        store: NetworkRuleStore,
        settings: EgressSettings,
        egress_key: Callable[[], bytes],
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``egress_key``: the deployment's (placeholders are derived from it)."""
        self._store = store
        self._settings = settings
        self._egress_key = egress_key
        self._clock = clock
        key = settings.secrets_key
        # Kept without egress too (set before the allowlist is): used only where it is.
        self._sealer = SecretSealer(key.get_secret_value()) if key is not None else None

    @property
    def configured(self) -> bool:
        return self._sealer is not None

    def put(
        self, org: str, name: str, value: str, hosts: Sequence[str], header: str
    ) -> SealedSecret:
        """``hosts`` (allowlist entries): the only ones the proxy puts it in a request
        to, in ``header``, whichever conversation it is offered to."""
        sealer = self._configured()
        _check_name(name)
        for host in hosts:
            try:
                parse_rule(host)
            except ValueError as exc:
                raise InvalidSecret(str(exc), entry=host) from exc
        if not hosts:
            msg = "a secret names at least one host it may be sent to"
            raise InvalidSecret(msg, secret=name)
        data = value.encode()
        limit = self._settings.max_secret_bytes
        if not re.fullmatch(SECRET_VALUE, value):
            msg = "a secret's value goes into an HTTP header: visible ASCII and spaces only"
            raise InvalidSecret(msg, secret=name)
        if len(data) > limit:
            msg = (
                f"the value is {len(data)} bytes; at most {limit} (SIESTA_EGRESS__MAX_SECRET_BYTES)"
            )
            raise InvalidSecret(msg, secret=name, limit=limit)
        now = self._clock()
        sealed = sealer.seal(org, name, data)
        record = SealedSecret(org, name, sealed, now, now, len(data), tuple(hosts), header)
        limit = self._settings.max_secrets_per_org
        if not self._store.put_secret(record, limit):
            msg = f"the org has {limit} secrets already (SIESTA_EGRESS__MAX_SECRETS_PER_ORG)"
            raise SecretLimitReached(msg, limit=limit)
        return self.get(org, name)

    def get(self, org: str, name: str) -> SealedSecret:
        self._configured()
        found = self._store.secret(org, name)
        if found is None:
            msg = f"no secret {name!r} in this org"
            raise SecretNotFound(msg, secret=name)
        return found

    def list(self, org: str) -> list[SealedSecret]:
        self._configured()
        return self._store.org_secrets(org)

    def delete(self, org: str, name: str) -> None:
        """Gone at once for new requests; a proxy that read it forgets it within
        ``SIESTA_EGRESS__NETWORK_RULES_CACHE_SECONDS``."""
        self._configured()
        if not self._store.delete_secret(org, name):
            msg = f"no secret {name!r} in this org"
            raise SecretNotFound(msg, secret=name)

    def bindings(self, org: str, specs: Sequence[SecretSpec]) -> tuple[SecretBinding, ...]:
        """Bindings from a request, or the 4xx that says what is wrong with them: each
        secret must exist in the org, each variable be given once and not be one the
        service sets itself."""
        if not specs:
            return ()
        self._configured()
        seen: set[str] = set()
        for spec in specs:
            if spec.env.upper() in RESERVED_ENV or spec.env.upper().startswith("SIESTA_"):
                msg = f"{spec.env}: the service sets this variable itself"
                raise InvalidSecret(msg, env=spec.env)
            if spec.env in seen:
                msg = f"{spec.env} is given twice"
                raise InvalidSecret(msg, env=spec.env)
            seen.add(spec.env)
            self.get(org, spec.secret)
        return tuple(SecretBinding(spec.secret, spec.env) for spec in specs)

    def header_set(self, org: str, host: str, header: str, value: str) -> HeaderSet:
        """A header the proxy sets on requests to ``host`` (E2B's ``transform``), its
        value sealed like a secret's and held to the same bounds."""
        sealer = self._configured()
        try:
            parse_rule(host)
        except ValueError as exc:
            raise InvalidSecret(str(exc), entry=host) from exc
        if not re.fullmatch(HEADER_NAME, header):
            msg = f"{header!r} is not an HTTP header name"
            raise InvalidSecret(msg, header=header)
        data = value.encode()
        limit = self._settings.max_secret_bytes
        if not re.fullmatch(SECRET_VALUE, value) or len(data) > limit:
            msg = (
                f"the value of {header} for {host}: visible ASCII, at most {limit} bytes "
                "(SIESTA_EGRESS__MAX_SECRET_BYTES)"
            )
            raise InvalidSecret(msg, header=header, limit=limit)
        unsealed = HeaderSet(host, header, "")
        return replace(unsealed, sealed=sealer.seal(org, unsealed.sealed_name, data))

    def placeholder(self, org: str, conversation: str, binding: SecretBinding) -> str:
        return placeholder(self._egress_key(), org, conversation, binding.secret)

    def _configured(self) -> SecretSealer:
        if self._sealer is None:
            msg = (
                "secrets are not configured on this deployment: it needs "
                "SIESTA_EGRESS__SECRETS_KEY (and an egress allowlist to use them)"
            )
            raise SecretsNotConfigured(msg)
        return self._sealer


def _check_name(name: str) -> None:
    if not re.fullmatch(SECRET_NAME, name):
        msg = f"{name!r}: a secret's name is letters, digits, _ . - (at most 64)"
        raise InvalidSecret(msg, secret=name)


TRUST_ENV = {
    # Python's requests and pip read their own bundle (certifi) unless told: the
    # system's, which holds the deployment's authority since the sandbox started.
    "REQUESTS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt",
    "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
    # Node adds these to its own compiled-in list.
    "NODE_EXTRA_CA_CERTS": "/usr/local/share/ca-certificates/siesta-egress.crt",
}
"""What a command needs, beyond the system's trust store, to trust the proxy where it
substitutes secrets (OpenSSL, curl, Python's ssl and Go read the system's)."""


def secrets_environment(
    secrets: OrgSecrets, store: NetworkRuleStore
) -> Callable[[str, str], dict[str, str]]:
    """A command's variables for the secrets offered to its conversation: each binding's
    placeholder, and where to find the deployment's authority."""

    def environment(org: str, conversation: str) -> dict[str, str]:
        rules = store.network_rules(org, conversation)
        if rules is None or not rules.secrets:
            return {}
        offered = {b.env: secrets.placeholder(org, conversation, b) for b in rules.secrets}
        return {**TRUST_ENV, **offered}

    return environment
