"""The egress proxy: the one way out of a sandbox network.

A small asyncio HTTP proxy of our own, not tinyproxy or squid, because what it
must decide is ours: whose request this is (signed credentials, not a source
address), the deployment's allowlist narrowed per agent, and the address policy
checked on the very address it connects to. Off-the-shelf proxies resolve a name
once to check it and again to connect, and know nothing of conversations.

It serves ``CONNECT host:port`` (HTTPS and anything else over TLS) and plain HTTP
requests in absolute form (``GET http://host/path``), one request per client
connection for plain HTTP (``Connection: close``), so every request is checked.
Names are resolved here (sandboxes have no DNS); IP literals are refused; every
address a name resolves to must pass the address policy, and the connection goes
to one of those checked addresses, never to a second resolution.

Credentials are checked twice: their signature (``credentials``), then whether
they still work (``revocations``: a deleted conversation's are revoked, old ones
expire). When a conversation's deletion reaches the proxy, the connections it
carries on credentials the deletion revoked are closed too.

The list is narrowed a third time by the conversation's own network rules
(``sandbox_rules``: read from the store, briefly cached), and each refusal of a
conversation's request is added to its count in the store (its sandbox's metrics).

Where a conversation is offered secrets, its requests to their hosts have the
placeholders replaced (``substitution``; HTTPS through ``interception``).

Each decision is reported through ``emit`` (the service counts refusals in its
metrics and logs them).

Over 400 lines: one connection's whole path (credentials, the three lists, the
address policy, substitution, the splice) reads best in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from runtime.core.addresses import IpAddress, IpNetwork, is_ip_literal, literal_address, refusal
from runtime.core.network_rules import Allowlist, EgressPolicy, NetworkRules, normalise_host
from runtime.core.records import EgressRevocation
from runtime.egress.credentials import EgressClaims, basic_credentials, verify
from runtime.egress.http import Refused, answer, authority, upstream_head
from runtime.egress.interception import Interception
from runtime.egress.revocations import Revocations, open_source
from runtime.egress.sandbox_rules import RefusalTally, SandboxRules, keep_up
from runtime.egress.substitution import SecretValues, Substitution, closing, substitute
from runtime.seams.stores import NetworkRuleStore, RevocationStore

COPY_CHUNK = 64 * 1024
Emit = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class ProxyConfig:
    key: bytes
    allow: Allowlist
    host: str = "127.0.0.1"
    port: int = 3128
    hosts: dict[str, str] = field(default_factory=dict)
    """Names answered without DNS (like /etc/hosts); still checked like any address."""
    allowed_private_networks: tuple[IpNetwork, ...] = ()
    connect_timeout_seconds: float = 10.0
    idle_timeout_seconds: float = 300.0
    head_timeout_seconds: float = 10.0
    """A client must send its request head within this (slow heads hold no slot long)."""
    max_connections: int = 256
    max_connections_per_conversation: int = 64
    """One sandbox cannot take every connection of the proxy from the others."""
    max_header_bytes: int = 64 * 1024
    store_url: str | None = None
    """The store deletions record revocations in (``sqlite:///path``, ``redis://...``);
    ``None``: none are read (credentials still expire)."""
    revocation_retention_seconds: float = 7 * 24 * 3600.0
    """Revocations are kept this long; credentials older than this are refused."""
    revocation_poll_seconds: float = 5.0
    """How often the store is asked for new revocations."""
    network_rules_cache_seconds: float = 2.0
    """How long a conversation's own network rules are kept before they are read again."""
    refusal_retention_seconds: float = 24 * 3600.0
    """A conversation's refusal count is forgotten this long after its last refusal."""
    secrets_key: str | None = None
    """Opens orgs' sealed secrets; ``None``: none are substituted."""
    authority_cert: str | None = None
    """The deployment's authority (PEM) hosts' certificates are signed with, where the
    proxy ends a sandbox's TLS to substitute a secret; with ``authority_key``."""
    authority_key: str | None = None
    upstream_ca: str | None = None
    """Authorities (PEM) trusted for real servers beside the system's."""


@dataclass
class _Request:
    method: str
    host: str
    port: int
    head: bytes
    """What to send upstream first (plain HTTP), empty for CONNECT."""
    claims: EgressClaims | None = None


Carrying = dict[asyncio.Task[Any], float]
"""A conversation's connections being carried, each with its credentials' issue time."""


class EgressProxy:
    def __init__(self, config: ProxyConfig, emit: Emit) -> None:
        self._config = config
        self._emit = emit
        self._slots = asyncio.Semaphore(config.max_connections)
        self._carrying: dict[tuple[str, str], Carrying] = {}
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._close_store: Callable[[], None] | None = None
        self._following: asyncio.Task[None] | None = None
        self._keeping: asyncio.Task[None] | None = None
        self.revocations = self._revocations(None)
        self.rules, self.refusals = self._network(None)
        self.secrets = self._secrets(None)
        self._tls = Interception.configured(config)

    def _revocations(self, source: RevocationStore | None) -> Revocations:
        return Revocations(
            source,
            retention_seconds=self._config.revocation_retention_seconds,
            poll_seconds=self._config.revocation_poll_seconds,
            emit=self._emit,
        )

    def _network(self, source: NetworkRuleStore | None) -> tuple[SandboxRules, RefusalTally]:
        rules = SandboxRules(
            source, cache_seconds=self._config.network_rules_cache_seconds, emit=self._emit
        )
        keep = self._config.refusal_retention_seconds
        return rules, RefusalTally(source, keep_seconds=keep, emit=self._emit)

    def _secrets(self, source: NetworkRuleStore | None) -> SecretValues | None:
        if self._config.secrets_key is None:
            return None
        from runtime.egress.sealing import SecretSealer  # cryptography: only when used

        return SecretValues(
            source,
            SecretSealer(self._config.secrets_key),
            self._config.key,
            cache_seconds=self._config.network_rules_cache_seconds,
            emit=self._emit,
        )

    async def start(self) -> int:
        """Read the revocations, then listen; returns the port (useful with port 0).
        Raises ``RevocationsUnavailable`` when the store cannot be read."""
        if self._config.store_url is not None:
            source, network, self._close_store = open_source(self._config.store_url)
            self.revocations = self._revocations(source)
            self.rules, self.refusals = self._network(network)
            self.secrets = self._secrets(network)
        await self.revocations.load()
        self._following = asyncio.create_task(self.revocations.follow(self._close_revoked))
        self._keeping = asyncio.create_task(keep_up(self.rules, self.refusals))
        self._server = await asyncio.start_server(
            self._serve,
            self._config.host,
            self._config.port,
            limit=self._config.max_header_bytes,
            reuse_port=True,  # instances of one deployment on one host share the port
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening and end every open connection."""
        for task in (self._following, self._keeping):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for connection in self._connections:
            connection.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self.refusals.flush()
        if self._close_store is not None:
            self._close_store()

    def _close_revoked(self, revoked: list[EgressRevocation]) -> None:
        for revocation in revoked:
            key = (revocation.org, revocation.conversation)
            for task, issued_at in list(self._carrying.get(key, {}).items()):
                if issued_at <= revocation.revoked_at:
                    task.cancel()
                    self._emit(
                        {
                            "event": "closed",
                            "org": revocation.org,
                            "conversation": revocation.conversation,
                            "reason": "credentials_revoked",
                            "detail": "a connection of a deleted conversation",
                        }
                    )

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve_one(reader, writer)
        finally:
            self._connections.discard(task)

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request: _Request | None = None
        try:
            if self._slots.locked():
                limit = self._config.max_connections
                raise Refused(503, "busy", f"all {limit} connections are in use")
            async with self._slots:
                request = await self._read_request(reader)
                claims = self._checked_credentials(request)
                with self._counted(claims):
                    await self._carry(request, claims, reader, writer)
        except Refused as refused:
            # Policy refusals (403, 407) are what operators watch; the rest failed.
            event = "refused" if refused.status in (403, 407) else "failed"
            self._report(event, request, reason=refused.reason, detail=refused.detail)
            # The sandbox's count: what its rules and the lists refused it (a 407 is about
            # credentials, maybe a deleted conversation's copied out: not its sandbox's).
            if refused.status == 403 and request is not None and request.claims is not None:
                claims = request.claims
                self.refusals.note(claims.org, claims.conversation, request.host, refused.reason)
            await answer(writer, refused.status, refused.reason, refused.detail)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    def _checked_credentials(self, request: _Request) -> EgressClaims:
        if request.claims is None:
            raise Refused(407, "unauthenticated", "missing or invalid sandbox credentials")
        refusal = self.revocations.refusal(request.claims)
        if refusal is not None:
            raise Refused(407, refusal.reason, refusal.detail)
        return request.claims

    @contextlib.contextmanager
    def _counted(self, claims: EgressClaims) -> Iterator[None]:
        """Holds one of the conversation's connections while the request is carried."""
        key = (claims.org, claims.conversation)
        carrying = self._carrying.setdefault(key, {})
        limit = self._config.max_connections_per_conversation
        if len(carrying) >= limit:
            msg = f"this sandbox already has {limit} connections open (the most it may)"
            raise Refused(503, "too_many_connections", msg)
        task = asyncio.current_task()
        assert task is not None
        carrying[task] = claims.issued_at or 0.0
        try:
            yield
        finally:
            del carrying[task]
            if not carrying:
                del self._carrying[key]

    async def _carry(
        self,
        request: _Request,
        claims: EgressClaims,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        address, own = await self._checked_address(request, claims)
        substitutions: list[Substitution] = []
        if self.secrets is not None:
            org, conversation = claims.org, claims.conversation
            substitutions = await self.secrets.substitutions(
                org, conversation, own, request.host, request.port
            )
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(str(address), request.port),
                self._config.connect_timeout_seconds,
            )
        except (OSError, TimeoutError) as exc:
            detail = f"{request.host}:{request.port} ({address}): {exc or 'connect timed out'}"
            raise Refused(502, "connect_failed", detail) from exc
        self._report("allowed", request, address=str(address))
        if request.method == "CONNECT" and substitutions and self._tls is not None:
            self._report("intercepted", request, address=str(address))
            await self._tls.carry(request.host, substitutions, reader, writer, up_writer)
            await self._splice(reader, writer, up_reader, up_writer, close_after_response=True)
            return
        if request.method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        else:
            up_writer.write(
                substitute(request.head, substitutions) if substitutions else request.head
            )
        await self._splice(reader, writer, up_reader, up_writer)

    async def _read_request(self, reader: asyncio.StreamReader) -> _Request:
        try:
            head = await asyncio.wait_for(
                reader.readuntil(b"\r\n\r\n"), self._config.head_timeout_seconds
            )
        except asyncio.LimitOverrunError as exc:
            limit = self._config.max_header_bytes
            msg = f"request head over {limit} bytes"
            raise Refused(431, "head_too_large", msg) from exc
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, _version = lines[0].split(" ", 2)
        except ValueError as exc:
            raise Refused(400, "bad_request", "malformed request line") from exc
        headers = [line.split(":", 1) for line in lines[1:] if ":" in line]
        auth = next((v for k, v in headers if k.strip().lower() == "proxy-authorization"), "")
        if method.upper() == "CONNECT":
            host, port = authority(target, default_port=443)
            request = _Request("CONNECT", host, port, b"")
        else:
            url = urlsplit(target)
            if url.scheme != "http" or not url.hostname:
                msg = "plain requests must be http://host/... (use CONNECT for https)"
                raise Refused(400, "bad_request", msg)
            host, port = normalise_host(url.hostname), url.port or 80
            request = _Request(method, host, port, upstream_head(method, url, headers))
        pair = basic_credentials(auth) if auth else None
        request.claims = verify(self._config.key, *pair) if pair else None
        return request

    async def _checked_address(
        self, request: _Request, claims: EgressClaims
    ) -> tuple[IpAddress, NetworkRules | None]:
        """The address to connect to, and the conversation's own rules (read for it)."""
        host, port = request.host, request.port
        literal = literal_address(host)
        if literal is None and is_ip_literal(host):
            msg = f"{host}: write an address in its usual form (1.2.3.4, [2001:db8::1])"
            raise Refused(403, "ip_literal", msg)
        narrowed = claims.narrowed_to
        own = await self.rules.get(claims.org, claims.conversation)
        policy = EgressPolicy(
            self._config.allow, Allowlist.parse(narrowed) if narrowed is not None else None, own
        )
        if literal is None:
            reason = policy.refusal(host, port)  # by name: no DNS for a refused name
            if reason is not None and not policy.by_address:
                msg = f"{host}:{port} is not in the egress allowlist ({policy.describe()})"
                raise Refused(403, reason, msg)
        addresses = [literal] if literal is not None else await self._resolve(host, port)
        for address in addresses:
            reason = policy.refusal(host, port, address)
            if reason == "host_not_allowed" and literal is not None:
                msg = (
                    f"{host}:{port}: addresses are refused unless the egress allowlist "
                    f"lists them ({policy.describe()})"
                )
                raise Refused(403, "ip_literal", msg)
            if reason is not None:
                at = f" (at {address})" if literal is None else ""
                msg = f"{host}:{port}{at} is not in the egress allowlist ({policy.describe()})"
                raise Refused(403, reason, msg)
            reason = refusal(address, self._config.allowed_private_networks)
            if reason is not None:
                msg = f"{host} resolves to {address}, a {reason} address"
                raise Refused(403, "address_not_allowed", msg)
        return addresses[0], own

    async def _resolve(self, host: str, port: int) -> list[IpAddress]:
        pinned = self._config.hosts.get(host)
        if pinned is not None:
            return [ipaddress.ip_address(pinned)]
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise Refused(502, "dns_failed", f"{host} does not resolve ({exc})") from exc
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
        if not addresses:
            raise Refused(502, "dns_failed", f"{host} has no address")
        return addresses

    async def _splice(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
        *,
        close_after_response: bool = False,
    ) -> None:
        """Both ways until both end; ``close_after_response``: the answer's head says
        ``Connection: close`` (the request sent was the only one read)."""
        copy_back = self._copy_closing if close_after_response else self._copy
        answer_back = copy_back(up_reader, writer)
        try:
            await asyncio.gather(self._copy(reader, up_writer), answer_back)
        finally:
            up_writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await up_writer.wait_closed()

    async def _copy(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        idle = self._config.idle_timeout_seconds
        try:
            while chunk := await asyncio.wait_for(source.read(COPY_CHUNK), idle):
                sink.write(chunk)
                await sink.drain()
            if sink.can_write_eof():
                sink.write_eof()
        except (ConnectionError, TimeoutError, OSError):
            sink.close()

    async def _copy_closing(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(
                source.readuntil(b"\r\n\r\n"), self._config.idle_timeout_seconds
            )
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ConnectionError,
            TimeoutError,
            OSError,
        ):
            sink.close()
            return
        sink.write(closing(head))
        await self._copy(source, sink)

    def _report(self, event: str, request: _Request | None, **fields: str) -> None:
        claims = request.claims if request else None
        self._emit(
            {
                "event": event,
                "org": claims.org if claims else "",
                "conversation": claims.conversation if claims else "",
                "host": request.host if request else "",
                "port": request.port if request else 0,
                **fields,
            }
        )
