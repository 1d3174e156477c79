"""The effective configuration, as a tree, with every secret masked: any ``SecretStr``,
any value under a name that speaks of a token, password, secret, key or digest, and
the password in a URL."""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from pydantic import SecretBytes, SecretStr

from api.console.auth import PageSession
from api.console.render import render
from api.console.routing import PREFIX, ConsoleRoute
from api.deps import ServicesDep

MASK = "••••••"
SECRET_NAME = re.compile(
    r"token|passw|secret|key|digest|sha256|credential|authori[sz]ation|cookie", re.IGNORECASE
)
URL_PASSWORD = re.compile(r"(?<=://)([^/@:\s]*):[^/@\s]*@")

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)


@router.get(f"{PREFIX}/settings")
def settings_page(services: ServicesDep, session: PageSession) -> HTMLResponse:
    tree = masked(services.settings.model_dump(mode="python"))
    return render(session, "settings.html", page="settings", tree_data=tree)


def masked(value: Any, secret: bool = False) -> Any:
    """``value`` with every secret in it replaced by ``MASK`` (``None`` stays: whether
    a secret is set is no secret); ``secret``: a secret-looking name holds it."""
    if isinstance(value, dict):
        return {
            str(name): masked(item, secret or bool(SECRET_NAME.search(str(name))))
            for name, item in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        return [masked(item, secret) for item in value]
    if value is None:
        return None
    if secret or isinstance(value, SecretStr | SecretBytes):
        return MASK
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, str):
        return URL_PASSWORD.sub(rf"\1:{MASK}@", value)
    return value
