"""The deployment's egress authority as text, apart from ``authority.py`` so that
what only passes it along does not import ``cryptography``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AuthorityPem:
    cert: str
    """PEM: what sandboxes trust."""
    key: str
    """PEM: the proxy's alone."""
