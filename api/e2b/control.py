"""E2B's control plane at ``/e2b``: create, connect, get, list, kill, set timeout.

The stock SDKs (``E2B_API_URL=http://HOST:PORT/e2b``) call these paths; both the
pre-2.51 (``/sandboxes``) and the current (``/v2/sandboxes``) ones are served. Every
error is E2B's ``{"code": <status>, "message": ...}`` (the SDKs parse that before
they look at the status), and a refusal the SDK must not retry says
``Should-Retry: false``. ``X-API-Key`` is a Siesta token with the ``sandbox`` scope;
its org (``TokenSettings.org``, else ``SIESTA_E2B__DEFAULT_ORG``) is the one whose
sandboxes it makes and sees.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote

from anyio import to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from api.deps import through_door
from api.e2b.errors import e2b_error, refuse
from api.e2b.hosts import mask_request_host, public_traffic, traffic_token
from runtime.core import logs
from runtime.core.auth import Caller
from runtime.core.errors import InvalidRequest
from runtime.core.network_rules import HeaderSet, NetworkRules
from runtime.core.records import E2bSandbox
from runtime.e2b.network import e2b_network_rules, masked
from runtime.sandbox.network import NetworkRuleOutsideAllowlist
from runtime.services import Services

CLIENT_ID = "siesta"
IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9-]{1,255}")
"""What the SDKs send (``[a-z0-9-]{1,255}``); upper case is accepted too."""
MAX_PAGE = 100
Handler = Callable[[Request], Awaitable[Response]]


def services_of(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def caller_of(request: Request) -> tuple[Caller, str]:
    """The token's holder and its org; raises the 401/403 the SDK expects."""
    services = services_of(request)
    caller = services.tokens.identify(request.headers.get("x-api-key", ""))
    if caller is None:
        raise refuse(401, "a valid API key is required (X-API-Key: a Siesta token)")
    if not caller.may("sandbox"):
        raise refuse(403, f"the token {caller.name!r} lacks the 'sandbox' scope")
    logs.CALLER.set(caller.name)
    org = caller.org or services.settings.e2b.default_org
    if not caller.allows_org(org):  # a token of other orgs than the default, none of them one
        raise refuse(403, str(caller.not_allowed(org)))
    return caller, org


def handler(run: Handler) -> Handler:
    """``run`` with every error answered in E2B's shape."""

    async def wrapped(request: Request) -> Response:
        try:
            return await run(request)
        except Exception as exc:
            return e2b_error(exc)

    return wrapped


def sandbox_json(sandbox: E2bSandbox, services: Services) -> dict[str, Any]:
    return {
        "templateID": sandbox.template,
        "sandboxID": sandbox.sandbox_id,
        "clientID": CLIENT_ID,
        "envdVersion": services.settings.e2b.envd_version,
        "envdAccessToken": sandbox.access_token,
        "domain": services.settings.e2b.ports_domain,
        "trafficAccessToken": None
        if sandbox.public_traffic
        else traffic_token(services.port_tokens, sandbox),
    }


def detail_json(sandbox: E2bSandbox, services: Services) -> dict[str, Any]:
    limits = services.settings.sandbox
    return {
        **sandbox_json(sandbox, services),
        "startedAt": _iso(sandbox.started_at),
        "endAt": _iso(sandbox.end_at),
        "cpuCount": max(1, math.ceil(limits.cpu_limit)),
        "memoryMB": limits.memory_limit_mb,
        "diskSizeMB": limits.workspace_size_mb,
        "state": sandbox.state,
        "metadata": sandbox.metadata,
        "lifecycle": {"onTimeout": sandbox.on_timeout, "autoResume": sandbox.auto_resume},
    }


def _iso(at: float) -> str:
    if math.isinf(at):
        at = 253402300799.0  # 9999-12-31T23:59:59Z: a paused sandbox does not time out
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise refuse(400, f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise refuse(400, "the body must be a JSON object")
    return body


def _string_map(body: dict[str, Any], name: str) -> dict[str, str]:
    value = body.get(name) or {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise refuse(400, f"{name} must be an object of strings")
    return value


def _optional_int(body: dict[str, Any], name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise refuse(400, f"{name} must be a whole number of seconds, 0 or more")
    return value


def _auto_resume(body: dict[str, Any], auto_pause: bool) -> bool:
    """``autoResume.enabled``: traffic to a paused sandbox's ports resumes it."""
    config = body.get("autoResume")
    if config is None:
        return False
    enabled = config.get("enabled") if isinstance(config, dict) else None
    if not isinstance(enabled, bool):
        raise refuse(400, "autoResume must be an object with a boolean enabled")
    if enabled and not auto_pause:
        raise refuse(400, "autoResume can only be enabled when the timeout pauses (autoPause)")
    return enabled


@handler
async def create(request: Request) -> Response:
    caller, org = caller_of(request)
    body = await _json_body(request)
    template = body.get("templateID") or "base"
    if not isinstance(template, str):
        raise refuse(400, "templateID must be a string")
    metadata = _string_map(body, "metadata")
    env_vars = _string_map(body, "envVars")
    timeout = _optional_int(body, "timeout")
    auto_pause = body.get("autoPause") is True
    auto_resume = _auto_resume(body, auto_pause)
    key = request.headers.get("idempotency-key") or None
    if key is not None and not IDEMPOTENCY_KEY.fullmatch(key):
        raise refuse(400, "Idempotency-Key must be 1 to 255 characters of a-z 0-9 -")
    services = services_of(request)
    network = _network_rules(services, org, body, body.get("network"))  # before anything is made
    mask = mask_request_host(body)
    # The rules and privacy are stored with the record, before the sandbox is made: a
    # retry (or a caller who lists it) never finds it more open than asked for.
    sandbox, _ = await to_thread.run_sync(
        lambda: services.e2b.create(
            org,
            caller.name,
            template,
            timeout_seconds=timeout,
            metadata=metadata,
            env_vars=env_vars,
            auto_pause=auto_pause,
            auto_resume=auto_resume,
            public_traffic=public_traffic(body),
            mask_request_host=mask,
            network=network,
            idempotency_key=key,
        )
    )
    # A retry gets the same answer as the first call: the same sandbox, made once.
    return JSONResponse(sandbox_json(sandbox, services), status_code=201)


def _network_rules(
    services: Services, org: str, body: dict[str, Any], options: Any
) -> NetworkRules | None:
    """``allow_internet_access``, the egress lists and the header transforms in
    ``options`` (``network`` at create, the body itself in an update;
    ``runtime/e2b/network.py``)."""
    secrets = services.secrets

    def seal_header(host: str, header: str, value: str) -> HeaderSet:
        return secrets.header_set(org, host, header, value)

    seal = seal_header if secrets.configured else None
    try:
        return e2b_network_rules(services.network, body.get("allow_internet_access"), options, seal)
    except (InvalidRequest, NetworkRuleOutsideAllowlist) as exc:  # E2B's SDKs: 400
        raise refuse(400, str(exc)) from exc


@handler
async def update_network(request: Request) -> Response:
    """``Sandbox.update_network``: the egress rules replaced as a whole (what is left
    out is cleared); they apply to the running sandbox's next connections."""
    caller, org = caller_of(request)
    body = await _json_body(request)
    services = services_of(request)
    options = {k: v for k, v in body.items() if k != "allow_internet_access"}
    rules = _network_rules(services, org, body, options) or NetworkRules()
    sandbox_id = request.path_params["sandbox_id"]
    shown = {**body, "rules": masked(body.get("rules"))} if body.get("rules") else body

    def update() -> None:
        ctx = services.e2b.context(services.e2b.get(org, sandbox_id))
        with through_door(services, ctx, caller.name, "setNetworkRules", shown):
            services.network.set(ctx, rules)

    await to_thread.run_sync(update)
    return Response(status_code=204)


@handler
async def get_info(request: Request) -> Response:
    _, org = caller_of(request)
    services = services_of(request)
    sandbox_id = request.path_params["sandbox_id"]
    sandbox = await to_thread.run_sync(lambda: services.e2b.get(org, sandbox_id))
    return JSONResponse(detail_json(sandbox, services))


@handler
async def list_sandboxes(request: Request) -> Response:
    """Newest first by default; filters: ``metadata`` (every pair must match; the SDKs
    encode it twice), ``state`` (comma-separated), ``template``, ``startedAfter`` (an
    ISO 8601 time: started at or after it); pages of ``limit`` with the next page's
    token in ``x-next-token``."""
    _, org = caller_of(request)
    services = services_of(request)
    query = request.query_params
    wanted = dict((unquote(k), unquote(v)) for k, v in parse_qsl(query.get("metadata", "")))
    states = {s for s in query.get("state", "running,paused").split(",") if s}
    template = query.get("template")
    try:
        limit = min(max(int(query.get("limit", MAX_PAGE)), 1), MAX_PAGE)
        start = int(query.get("nextToken") or 0)
    except ValueError as exc:
        raise refuse(400, "limit and nextToken must be whole numbers") from exc
    started_after = _time_query(query.get("startedAfter"))
    listed = await to_thread.run_sync(lambda: services.e2b.list(org))  # the store: off the loop
    found = [
        sandbox
        for sandbox in listed
        if sandbox.state in states
        and (template is None or sandbox.template == template)
        and all(sandbox.metadata.get(k) == v for k, v in wanted.items())
        # Compared as shown (startedAt to the microsecond): a time read back from a
        # listing finds its own sandbox.
        and (started_after is None or round(sandbox.started_at, 6) >= started_after)
    ]
    if query.get("order", "desc") == "desc":
        found.reverse()
    page = found[start : start + limit]
    headers = {"x-next-token": str(start + limit)} if start + limit < len(found) else {}
    return JSONResponse([detail_json(s, services) for s in page], headers=headers)


def _time_query(text: str | None) -> float | None:
    """An ISO 8601 time (the SDKs send one with its offset; none means UTC) as epoch
    seconds."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        raise refuse(400, f"startedAfter must be an ISO 8601 time, not {text[:64]!r}") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return round(when.timestamp(), 6)


@handler
async def template_alias(request: Request) -> Response:
    """``Template.exists(name)``: the catalog's enabled images are the templates."""
    caller_of(request)  # a valid key is needed; the catalog is the same for every org
    alias = request.path_params["alias"]
    services = services_of(request)
    image = await to_thread.run_sync(lambda: services.catalog.find(alias))
    if image is None or not image.enabled:
        raise refuse(404, f"template {alias!r} not found")
    return JSONResponse({"templateID": alias, "public": True})


@handler
async def kill(request: Request) -> Response:
    _, org = caller_of(request)
    services = services_of(request)
    sandbox_id = request.path_params["sandbox_id"]
    if not await to_thread.run_sync(lambda: services.e2b.kill(org, sandbox_id)):
        raise refuse(404, f"sandbox {sandbox_id} not found")
    return Response(status_code=204)


@handler
async def set_timeout(request: Request) -> Response:
    _, org = caller_of(request)
    body = await _json_body(request)
    timeout = _optional_int(body, "timeout")
    if timeout is None:
        raise refuse(400, "timeout (seconds) is required")
    services = services_of(request)
    sandbox_id = request.path_params["sandbox_id"]
    await to_thread.run_sync(lambda: services.e2b.set_timeout(org, sandbox_id, timeout))
    return Response(status_code=204)


@handler
async def connect(request: Request) -> Response:
    _, org = caller_of(request)
    body = await _json_body(request)
    timeout = _optional_int(body, "timeout")
    services = services_of(request)
    sandbox_id = request.path_params["sandbox_id"]
    sandbox, resumed = await to_thread.run_sync(
        lambda: services.e2b.connect(org, sandbox_id, timeout)
    )
    return JSONResponse(sandbox_json(sandbox, services), status_code=201 if resumed else 200)


ROUTES = [
    Route("/templates/aliases/{alias}", template_alias, methods=["GET"]),
    Route("/sandboxes", create, methods=["POST"]),
    Route("/v2/sandboxes", create, methods=["POST"]),
    Route("/sandboxes", list_sandboxes, methods=["GET"]),
    Route("/v2/sandboxes", list_sandboxes, methods=["GET"]),
    Route("/sandboxes/{sandbox_id}", get_info, methods=["GET"]),
    Route("/sandboxes/{sandbox_id}", kill, methods=["DELETE"]),
    Route("/sandboxes/{sandbox_id}/timeout", set_timeout, methods=["POST"]),
    Route("/sandboxes/{sandbox_id}/connect", connect, methods=["POST"]),
    Route("/v2/sandboxes/{sandbox_id}/connect", connect, methods=["POST"]),
    Route("/sandboxes/{sandbox_id}/network", update_network, methods=["PUT"]),
]
