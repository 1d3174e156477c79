"""The operators' web console at ``/console``: server-rendered pages for tokens with
the ``admin`` scope, kept out of the OpenAPI document.

``hosts`` keeps it to its own host name (never a preview's); ``auth`` signs in and out
and checks every change (session cookie, CSRF token, origin); ``routing`` gives each
route the security headers and answers refusals as pages; ``render`` draws a page in
the shared layout; ``pages/`` has one module per page; ``audit_hook`` records each
action in the audit trail.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from api.console.hosts import check_host
from api.console.pages import (
    approvals,
    audit,
    executions,
    images,
    knowledge,
    overview,
    sandboxes,
    settings,
    sign_in,
    static,
)

PAGES = (
    static,
    sign_in,
    overview,
    sandboxes,
    images,
    knowledge,
    approvals,
    executions,
    audit,
    settings,
)


def console_router() -> APIRouter:
    """Every console page's routes."""
    router = APIRouter(include_in_schema=False, dependencies=[Depends(check_host)])
    for page in PAGES:
        router.include_router(page.router)
    return router
