"""The deployment's certificate authority for the egress proxy's secret substitution.

To put a secret in an HTTPS request the proxy must read the request: it ends the
sandbox's TLS itself, with a certificate for the host signed by this authority
(which sandboxes trust from their start: ``images/siesta-agent`` installs it), and
opens its own TLS to the real server, verifying it as any client would. It does so
only for a host a binding of the conversation names; every other connection stays
an opaque tunnel.

The authority is the operator's (``SIESTA_EGRESS__CA_CERT_FILE``/``CA_KEY_FILE``) or
made once in the data folder. Hosts' certificates are made on first use and kept
(``MAX_HOSTS``, a day's validity with an hour's margin); they share one key, so a new
host costs a signature, not a key generation.
"""

from __future__ import annotations

import datetime
import os
import ssl
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from runtime.egress.authority_pem import AuthorityPem

MAX_HOSTS = 1024
"""Hosts' server contexts kept; the least recently used goes first."""
LEAF_DAYS = 1
CA_YEARS = 10


def load_or_make(cert_file: Path | None, key_file: Path | None, data_dir: Path) -> AuthorityPem:
    """The operator's authority, or the one in ``data_dir/egress-ca`` (made the first
    time: several instances sharing the folder agree on the first one written)."""
    if cert_file is not None and key_file is not None:
        return AuthorityPem(cert_file.read_text(), key_file.read_text())
    folder = data_dir / "egress-ca"
    if not (folder / "ca.crt").exists():
        made = make_authority()
        data_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".egress-ca-", dir=data_dir))
        (staging / "ca.key").write_text(made.key)
        os.chmod(staging / "ca.key", 0o600)
        (staging / "ca.crt").write_text(made.cert)
        try:
            staging.rename(folder)  # atomic: another instance's first write wins
        except OSError:
            for file in staging.iterdir():
                file.unlink()
            staging.rmdir()
    return AuthorityPem((folder / "ca.crt").read_text(), (folder / "ca.key").read_text())


def make_authority(name: str = "Siesta Runtime egress authority") -> AuthorityPem:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365 * CA_YEARS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return AuthorityPem(
        cert.public_bytes(serialization.Encoding.PEM).decode(),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode(),
    )


class HostCertificates:
    """Server-side TLS contexts for the hosts the proxy substitutes secrets for."""

    def __init__(self, authority: AuthorityPem) -> None:
        self._ca_cert = x509.load_pem_x509_certificate(authority.cert.encode())
        ca_key = serialization.load_pem_private_key(authority.key.encode(), password=None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey), "the authority's key is EC"
        self._ca_key = ca_key
        self._leaf_key = ec.generate_private_key(ec.SECP256R1())
        self._contexts: OrderedDict[str, tuple[ssl.SSLContext, datetime.datetime]] = OrderedDict()
        self._lock = threading.Lock()

    def context_for(self, host: str) -> ssl.SSLContext:
        now = datetime.datetime.now(datetime.UTC)
        with self._lock:
            kept = self._contexts.get(host)
            if kept is not None and kept[1] - now > datetime.timedelta(hours=1):
                self._contexts.move_to_end(host)
                return kept[0]
        context, expires = self._issue(host, now)
        with self._lock:
            self._contexts[host] = (context, expires)
            while len(self._contexts) > MAX_HOSTS:
                self._contexts.popitem(last=False)
        return context

    def _issue(self, host: str, now: datetime.datetime) -> tuple[ssl.SSLContext, datetime.datetime]:
        expires = now + datetime.timedelta(days=LEAF_DAYS)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host[:64])]))
            .issuer_name(self._ca_cert.subject)
            .public_key(self._leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(expires)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(self._ca_key, hashes.SHA256())
        )
        chain = cert.public_bytes(serialization.Encoding.PEM) + self._ca_cert.public_bytes(
            serialization.Encoding.PEM
        )
        key = self._leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.set_alpn_protocols(["http/1.1"])  # one request at a time is what we read
        # load_cert_chain reads files only: a private folder, removed at once.
        with tempfile.TemporaryDirectory(prefix="siesta-leaf-") as folder:
            chain_file, key_file = Path(folder) / "chain.pem", Path(folder) / "key.pem"
            chain_file.write_bytes(chain)
            key_file.write_bytes(key)
            context.load_cert_chain(chain_file, key_file)
        return context, expires


def upstream_context(extra_pem: str | None) -> ssl.SSLContext:
    """How the proxy verifies the real server: the system's authorities (and the
    operator's extra ones), host names checked."""
    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])
    if extra_pem:
        context.load_verify_locations(cadata=extra_pem)
    return context
