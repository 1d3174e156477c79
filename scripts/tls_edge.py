"""A TLS edge for trying the service as E2B's SDKs expect it: HTTPS on port 443.

E2B's SDK tests reach a sandbox's ports at ``https://PORT-ID.DOMAIN`` (``get_host``),
port 443, as on E2B, where TLS ends at the edge. Deployments put that edge in their
ingress or load balancer; this stands in for one on a test machine: it ends TLS for
``DOMAIN`` and ``*.DOMAIN`` with a certificate from an authority it makes, and passes
the bytes to the service unchanged (the ``Host`` header chooses the sandbox).

    python scripts/tls_edge.py DOMAIN UPSTREAM_PORT CA_OUT [--port 443]

Once it listens, it writes the authority's certificate to ``CA_OUT`` (point
``SSL_CERT_FILE`` at a bundle holding it), then serves until stopped. Not part of the
service.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

PEM = serialization.Encoding.PEM


def certificates(domain: str) -> tuple[bytes, bytes, bytes]:
    """(authority certificate, leaf chain, leaf key), PEM, for ``domain`` and below."""
    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(hours=1), now + datetime.timedelta(days=7))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"TLS edge for {domain}")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(domain), x509.DNSName(f"*.{domain}")]
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, domain)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca.public_bytes(PEM), leaf.public_bytes(PEM) + ca.public_bytes(PEM), key_pem


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(ConnectionError, ssl.SSLError, RuntimeError):
        writer.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("domain")
    parser.add_argument("upstream_port", type=int)
    parser.add_argument("ca_out", type=Path)
    parser.add_argument("--port", type=int, default=443)
    args = parser.parse_args()
    ca, chain, key = certificates(args.domain)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "chain.pem").write_bytes(chain)
        (Path(folder) / "key.pem").write_bytes(key)
        context.load_cert_chain(Path(folder) / "chain.pem", Path(folder) / "key.pem")

    async def edge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", args.upstream_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    # *.localhost resolves to ::1 and 127.0.0.1 (libnss-myhostname): both are served.
    server = await asyncio.start_server(edge, ["127.0.0.1", "::1"], args.port, ssl=context)
    args.ca_out.write_bytes(ca)  # once listening: a caller waiting for it may connect
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
