"""Reading an HTTPS request to substitute a secret in it: the sandbox's TLS ends at
the proxy (a certificate for the host from the deployment's authority), the proxy's
own TLS goes to the real server (verified: its name and chain, as any client would),
and the request's head is rewritten between the two (``substitution.py``).

Only connections to a host a binding of the conversation names are read so; every
other CONNECT stays an opaque tunnel. A server whose certificate does not verify
gets nothing: the sandbox gets 502 ``upstream_tls_failed`` (over its TLS).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import TYPE_CHECKING

from runtime.egress.http import Refused
from runtime.egress.substitution import Substitution, substitute

if TYPE_CHECKING:
    from runtime.egress.proxy import ProxyConfig

HANDSHAKE_SECONDS = 10.0


class Interception:
    def __init__(self, config: ProxyConfig) -> None:
        from runtime.egress.authority import HostCertificates, upstream_context
        from runtime.egress.authority_pem import AuthorityPem

        assert config.authority_cert is not None and config.authority_key is not None
        self._certificates = HostCertificates(
            AuthorityPem(config.authority_cert, config.authority_key)
        )
        self._upstream = upstream_context(config.upstream_ca)
        self._head_timeout = config.head_timeout_seconds
        self._max_head = config.max_header_bytes

    @classmethod
    def configured(cls, config: ProxyConfig) -> Interception | None:
        """``None`` when the proxy substitutes no secrets (no key or no authority)."""
        if config.secrets_key is None or config.authority_cert is None:
            return None
        return cls(config)

    async def carry(
        self,
        host: str,
        substitutions: list[Substitution],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        """``200 Connection Established`` answered, both TLS sessions made and the first
        request's head sent rewritten; the rest is spliced by the caller."""
        context = await asyncio.to_thread(self._certificates.context_for, host)
        # Reading stops before the 200 goes: the client's hello must stay in the socket
        # for the TLS layer, not land in the plain reader's buffer (where start_tls
        # would never see it).
        transport = writer.transport
        assert isinstance(transport, asyncio.ReadTransport)
        transport.pause_reading()
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        try:
            await writer.start_tls(context, ssl_handshake_timeout=HANDSHAKE_SECONDS)
        except (ssl.SSLError, OSError) as exc:  # not TLS, or it does not trust us
            msg = f"the sandbox's TLS to {host}: {exc}"
            raise ConnectionResetError(msg) from exc
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self._head_timeout)
        except asyncio.LimitOverrunError as exc:
            msg = f"request head over {self._max_head} bytes"
            raise Refused(431, "head_too_large", msg) from exc
        try:
            await up_writer.start_tls(
                self._upstream, server_hostname=host, ssl_handshake_timeout=HANDSHAKE_SECONDS
            )
        except (ssl.SSLError, OSError, TimeoutError) as exc:
            detail = f"{host}: its certificate did not verify, nothing was sent ({exc})"
            raise Refused(502, "upstream_tls_failed", detail) from exc
        up_writer.write(substitute(head, substitutions))
