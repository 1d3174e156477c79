"""An HTTP upstream on this host for egress tests, and the settings that let a
service's egress proxy (which runs on the host) reach it under test host names."""

from __future__ import annotations

import datetime
import http.server
import json
import ssl
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serving_ok() -> Iterator[int]:
    """An HTTP server on loopback answering ``200 ok`` to every GET; yields its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def egress_to(port: int, *names: str) -> dict[str, str]:
    """Service settings: egress on, allowing ``NAME:port`` for each name, each name
    pinned to loopback (a private address the deployment allows for the test)."""
    return {
        "SIESTA_EGRESS__ALLOW": ",".join(f"{name}:{port}" for name in names),
        "SIESTA_EGRESS__HOSTS": json.dumps({name: "127.0.0.1" for name in names}),
        "SIESTA_EGRESS__ALLOWED_PRIVATE_NETWORKS": '["127.0.0.0/8"]',
    }


@dataclass
class TlsUpstream:
    """An HTTPS server on loopback with a certificate for ``names`` from an authority of
    its own (``ca_pem``); it answers ``200 ok`` and keeps every request's headers."""

    port: int
    ca_pem: str
    seen: list[dict[str, str]]


def _authority_and_leaf(names: tuple[str, ...]) -> tuple[str, bytes, bytes]:
    """A throwaway authority (PEM) and a leaf for ``names`` signed by it (cert chain and
    key, PEM): made here with ``cryptography``, apart from the code under test."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "egress test upstream CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(name) for name in names]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    chain = leaf.public_bytes(pem) + ca.public_bytes(pem)
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca.public_bytes(pem).decode(), chain, key_pem


@contextmanager
def serving_tls(*names: str) -> Iterator[TlsUpstream]:
    ca_pem, chain, key = _authority_and_leaf(names)
    seen: list[dict[str, str]] = []

    class Recording(_Ok):
        def do_GET(self) -> None:
            seen.append({name.lower(): value for name, value in self.headers.items()})
            super().do_GET()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recording)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "chain.pem").write_bytes(chain)
        (Path(folder) / "key.pem").write_bytes(key)
        context.load_cert_chain(Path(folder) / "chain.pem", Path(folder) / "key.pem")
    # The handshake in each request's thread, not in the accepting loop: a client that
    # never finishes one would hold the loop (and the shutdown) for good.
    server.socket = context.wrap_socket(
        server.socket, server_side=True, do_handshake_on_connect=False
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield TlsUpstream(int(server.server_address[1]), ca_pem, seen)
    finally:
        server.shutdown()
        server.server_close()
