"""Which ``Host`` the console answers on.

The console must never share an origin with a page a sandbox serves: with
``SIESTA_CONSOLE__HOST`` set it answers on that name only (421 ``console_wrong_host``
elsewhere, the API's host included), and whatever is set it refuses a preview's host
(403 ``console_on_preview_host``): a name under ``SIESTA_PORTS__PREVIEW_DOMAIN``, or an
E2B sandbox's ``PORT-SANDBOXID.DOMAIN`` under ``SIESTA_E2B__PORTS_DOMAIN``. The host
forms answer those before any route (``api/previews.py``, ``api/e2b/hosts.py``); this
holds should that order ever change, or a host form be turned off.
"""

from __future__ import annotations

import re

from fastapi import Request

from api.console.routing import ConsoleRefusal
from api.deps import get_services
from runtime.settings import Settings, under

SANDBOX_LABEL = re.compile(r"\d{1,5}-.+")


class WrongHost(ConsoleRefusal):
    status = 421
    code = "console_wrong_host"


class PreviewHost(ConsoleRefusal):
    code = "console_on_preview_host"


def check_host(request: Request) -> None:
    settings = get_services(request).settings
    host = request.headers.get("host", "").lower()
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if is_preview_host(name, settings):
        msg = f"{name} is a preview's host: the console never answers there"
        raise PreviewHost(msg)
    wanted = settings.console.host
    if wanted is not None and name != wanted.lower():
        msg = f"the console answers at {wanted}, not at {name}"
        raise WrongHost(msg)


def is_preview_host(name: str, settings: Settings) -> bool:
    preview, e2b = settings.ports.preview_domain, settings.e2b.ports_domain
    if preview is not None and under(name, preview):
        return True
    if e2b is None or not name.endswith("." + e2b.lower()):
        return False
    return SANDBOX_LABEL.fullmatch(name[: -len(e2b) - 1]) is not None
