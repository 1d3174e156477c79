"""What every console route shares: the security headers, and refusals (signed out,
a failed CSRF check) answered as pages rather than the API's JSON errors."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from html import escape
from typing import Any

from fastapi import Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute

PREFIX = "/console"
SIGN_IN = f"{PREFIX}/sign-in"

SECURITY_HEADERS = {
    # Plain links and forms; one script file of our own (the image build's live log,
    # which reads its events from here): no inline script, nothing from elsewhere.
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}


class ConsoleRefusal(Exception):
    """A request the console turns away before its handler runs."""

    status = 403
    code = "forbidden"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def response(self) -> Response:
        page = (
            "<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<title>Refused: {self.code}</title>"
            f'<link rel=stylesheet href="{PREFIX}/static/console.css"></head>'
            f'<body><main class="refused"><h1>Refused</h1>'
            f"<p><code>{self.code}</code></p><p>{escape(self.reason)}</p>"
            f'<p><a href="{PREFIX}">Back to the console</a></p></main></body></html>'
        )
        return HTMLResponse(page, self.status, headers={"X-Siesta-Error": self.code})


class SignInFirst(ConsoleRefusal):
    """A page asked for without a (live) session: off to the sign-in form."""

    status = 303
    code = "console_sign_in_required"

    def response(self) -> Response:
        return RedirectResponse(SIGN_IN, 303, headers={"X-Siesta-Error": self.code})


class SignedOut(ConsoleRefusal):
    """A change sent without a (live) session."""

    status = 401
    code = "console_sign_in_required"


class CsrfFailed(ConsoleRefusal):
    """A change without the session's CSRF token, or from another origin."""

    code = "csrf_failed"


class ConsoleRoute(APIRoute):
    """Every console route: refusals as pages, security headers on every answer."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                response = await handler(request)
            except ConsoleRefusal as refusal:
                response = refusal.response()
            response.headers.update(SECURITY_HEADERS)
            return response

        return guarded
