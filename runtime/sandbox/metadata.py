"""A file's metadata: user-defined ``KEY: VALUE`` pairs kept as extended attributes
(``user.e2b.KEY``), envd 0.6.2's file metadata, also ``/v1``'s.

``siesta-fs`` reads and writes them in the sandbox (``setmeta``, ``getmeta``,
``entries``); this module checks what is written against the deployment's limits,
before anything is, and decodes what the helper reads (``KEY=VALUE&...``, each byte
outside printable ASCII and each of ``%&=`` as ``%XX``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from runtime.core.errors import InvalidRequest

PREFIX = "user.e2b."
"""The xattr namespace of metadata keys (envd's): other ``user.*`` xattrs are not metadata."""
MAX_KEY_BYTES = 255 - len(PREFIX)
"""The kernel's cap on an xattr's name, less the prefix (envd's 246)."""
HELPER = "/usr/local/lib/siesta/siesta-fs"


class InvalidMetadata(InvalidRequest):
    code = "invalid_metadata"


class MetadataTooLarge(InvalidRequest):
    code = "metadata_too_large"


@dataclass(frozen=True)
class MetadataLimits:
    max_keys: int
    """Keys on one file (``SIESTA_FILES__MAX_METADATA_KEYS``)."""
    max_bytes: int
    """Bytes of one file's metadata: each key with its ``user.e2b.`` prefix plus its
    value, as envd counts them (``SIESTA_FILES__MAX_METADATA_BYTES``)."""

    @property
    def encoded_bytes(self) -> int:
        """The most the helper prints for one file's metadata (each byte may take three,
        and one ``=`` or ``&`` per key)."""
        return 3 * self.max_bytes + 2 * self.max_keys


def check(metadata: dict[str, str], limits: MetadataLimits) -> None:
    """Refuses metadata that cannot be written: keys and values of printable ASCII
    (envd's rule: they travel as HTTP headers), keys of at most ``MAX_KEY_BYTES``, and
    no more than the limits; each refusal names the limit it is about."""
    if len(metadata) > limits.max_keys:
        msg = (
            f"{len(metadata)} metadata keys, over the limit of {limits.max_keys} per file "
            "(SIESTA_FILES__MAX_METADATA_KEYS)"
        )
        raise MetadataTooLarge(msg, limit=limits.max_keys, unit="keys")
    total = 0
    for key, value in metadata.items():
        if not key:
            msg = "a metadata key is empty"
            raise InvalidMetadata(msg)
        for label, text in (("key", key), (f"value of {key!r}", value)):
            if any(not 0x20 <= ord(c) <= 0x7E for c in text):
                msg = f"the metadata {label} is not printable ASCII (0x20-0x7e only)"
                raise InvalidMetadata(msg)
        if len(key) > MAX_KEY_BYTES:
            msg = f"the metadata key {key[:40]!r}... is over the limit of {MAX_KEY_BYTES} bytes"
            raise MetadataTooLarge(msg, limit=MAX_KEY_BYTES, unit="bytes")
        total += len(PREFIX) + len(key) + len(value)
    if total > limits.max_bytes:
        msg = (
            f"the metadata takes {total} bytes (keys with their {PREFIX!r} prefix, plus "
            f"values), over the limit of {limits.max_bytes} per file "
            "(SIESTA_FILES__MAX_METADATA_BYTES)"
        )
        raise MetadataTooLarge(msg, limit=limits.max_bytes, unit="bytes")


def pairs(metadata: dict[str, str]) -> list[str]:
    """``siesta-fs setmeta``'s arguments."""
    return [text for pair in sorted(metadata.items()) for text in pair]


def decode(encoded: bytes) -> dict[str, str]:
    """What ``siesta-fs`` read; a key or value that is not UTF-8 (set by a command in the
    sandbox) is left out, as envd leaves it out."""
    found: dict[str, str] = {}
    for pair in encoded.split(b"&") if encoded else []:
        key, _, value = pair.partition(b"=")
        try:
            found[unquote_to_bytes(key).decode()] = unquote_to_bytes(value).decode()
        except UnicodeDecodeError:
            continue
    return found
