"""The E2B-compatible API as one ASGI app, mounted at ``/e2b`` by ``api.app``.

It is kept apart from Siesta's own routes: its errors are E2B's shape, it is
not part of Siesta's OpenAPI document (E2B's own spec is its contract), and
its callers authenticate as E2B's SDKs do (``X-API-Key``; envd's access token).
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.datastructures import State
from starlette.routing import Mount, Router

from api.e2b import control, files, snapshots, usage
from api.e2b.envd import EnvdDispatcher
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
        routes=[Mount("/envd", app=envd), *usage.ROUTES, *snapshots.ROUTES, *control.ROUTES]
    )
    app.state = state
    return app
