"""The secret values in the settings, to mask wherever text leaves the service's hands
(an image build's log): every ``SecretStr``, every text whose name ends in token,
password, secret or key, and the password in a URL (the store's)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, SecretBytes, SecretStr

SECRET_NAME = re.compile(
    r"(?:^|_)(?:token|password|passwd|secret|key|credentials?)$", re.IGNORECASE
)
"""A name that says its text is a secret (not ``token_cookie``: a cookie's name)."""


def secret_values(settings: BaseModel) -> list[str]:
    found: set[str] = set()
    _collect(settings.model_dump(mode="python"), False, found)
    return sorted(found)


def _collect(value: Any, secret: bool, found: set[str]) -> None:
    if isinstance(value, dict):
        for name, item in value.items():
            # The name itself, not a parent's: under ``tokens`` are names and digests.
            _collect(item, bool(SECRET_NAME.search(str(name))), found)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _collect(item, secret, found)
    elif isinstance(value, SecretStr):
        found.add(value.get_secret_value())
    elif isinstance(value, SecretBytes):
        found.add(value.get_secret_value().decode(errors="replace"))
    elif isinstance(value, str):
        if secret:
            found.add(value)
        found.update(_url_password(value))


def _url_password(text: str) -> list[str]:
    if "://" not in text or "@" not in text:
        return []
    try:
        password = urlsplit(text).password
    except ValueError:
        return []
    return [password, unquote(password)] if password else []
