"""The E2B-compatible API as one ASGI app, mounted at ``/e2b`` by ``api.app``.

It is kept apart from Siesta's own routes: its errors are E2B's shape, it is
not part of Siesta's OpenAPI document (E2B's own spec is its contract), and
its callers authenticate as E2B's SDKs do (``X-API-Key``; envd's access token).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.datastructures import State
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from api.e2b import control, files, snapshots, usage
from api.e2b.envd import EnvdDispatcher
from api.e2b.errors import e2b_error, refuse
from api.e2b.filesystem import FilesystemService
from api.e2b.process import ProcessService
from api.e2b.protocol.filesystem.filesystem_connect import FilesystemASGIApplication
from api.e2b.protocol.process.process_connect import ProcessASGIApplication
from runtime.services import Services


def create_e2b_app(state: State) -> Starlette:
    """``state``: the main app's, whose ``services`` the lifespan sets."""

    def services() -> Services:
        found: Services = state.services
        return found

    envd = EnvdDispatcher(
        process=ProcessASGIApplication(ProcessService(services)),
        filesystem=FilesystemASGIApplication(FilesystemService(services)),
        http=Router(routes=files.ROUTES),
    )
    # usage first: its /sandboxes/metrics is not a sandbox id.
    app = Starlette(
        routes=[Mount("/envd", app=envd), *usage.ROUTES, *snapshots.ROUTES, *control.ROUTES],
        # E2B's shape for a route it does not have too: the SDKs read JSON on any error.
        exception_handlers={404: _not_found, 405: _not_allowed},
    )
    app.state = state
    return app


async def _not_found(request: Request, exc: Exception) -> Response:
    return e2b_error(refuse(404, f"{request.url.path} is not a route of this E2B API"))


async def _not_allowed(request: Request, exc: Exception) -> Response:
    message = f"{request.method} is not allowed on {request.url.path}"
    return e2b_error(refuse(405, message))


class SignedFiles:
    """``/files`` at the root, as envd's ``/e2b/envd/files``: the SDKs join envd's
    ``/files`` to the origin of ``E2B_SANDBOX_URL``, dropping its path. Only a signed
    URL is served there (the dispatcher refuses anything else)."""

    def __init__(self, e2b: ASGIApp) -> None:
        self._e2b = e2b

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "signature" not in query:
            await e2b_error(refuse(401, "only a signed URL is served at /files"))(
                scope, receive, send
            )
            return
        root = str(scope.get("root_path", ""))
        inner = {**scope, "root_path": root + "/e2b", "path": root + "/e2b/envd/files"}
        await self._e2b(inner, receive, send)
