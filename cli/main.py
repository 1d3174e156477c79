"""``siesta-runtime serve | mcp | reconcile | images | sandboxes | config check | tokens hash``."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import secrets
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr, ValidationError

from cli import config_check
from runtime.core import logs
from runtime.core.auth import MIN_TOKEN_CHARS, token_digest
from runtime.core.errors import ConfigurationError, SiestaError
from runtime.core.version import version
from runtime.images.catalog import ImageCatalog
from runtime.seams.provider_settings import DockerProviderSettings
from runtime.settings import Settings

if TYPE_CHECKING:
    from runtime.admin.images import CatalogAdmin
    from runtime.services import Services

TOKEN_FILE_NAME = "api-token"
log = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    """Exit codes: 0 done; 1 a runtime failure (e.g. the store or the engine cannot
    be reached); 2 invalid settings or a missing required one."""
    args = _parser().parse_args(argv)
    if args.handler in (_tokens_hash, config_check.run):  # they need no valid settings
        return int(args.handler(args))
    try:
        settings = Settings()
    except ValidationError as exc:
        logs.configure(logging.INFO)
        print(f"error: invalid settings:\n{config_check.invalid(exc)}", file=sys.stderr)
        return 2
    logs.configure(logging.DEBUG if settings.debug else logging.INFO)
    try:
        result: int = args.handler(args, settings)
    except ConfigurationError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except SiestaError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 1
    return result


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="siesta-runtime", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the HTTP API")
    serve.add_argument("--host", help="default: SIESTA_HTTP__HOST (127.0.0.1)")
    serve.add_argument("--port", type=int, help="default: SIESTA_HTTP__PORT (8080)")
    serve.add_argument(
        "--create-token",
        action="store_true",
        help="without SIESTA_API_TOKEN: use DATA_DIR/api-token, creating a random one",
    )
    serve.set_defaults(handler=_serve)

    mcp = commands.add_parser(
        "mcp",
        help="serve MCP over stdio for one conversation (options default to SIESTA_MCP_*)",
    )
    for option, required, text in MCP_OPTIONS:
        variable = "SIESTA_MCP_" + option.upper().replace("-", "_")
        mcp.add_argument(
            f"--{option}",
            default=os.environ.get(variable),
            required=required and variable not in os.environ,
            help=f"{text} (env {variable})",
        )
    mcp.set_defaults(handler=_mcp)

    images = commands.add_parser("images", help="the base-image catalog")
    image_commands = images.add_subparsers(required=True, metavar="ACTION")
    build = image_commands.add_parser("build", help="build catalog images (all, or the ids given)")
    build.add_argument("ids", nargs="*", metavar="ID")
    build.add_argument(
        "--from-scratch",
        action="store_true",
        help="remove the base and these images first: build as on a machine that never had them",
    )
    build.set_defaults(handler=_images_build)
    listing = image_commands.add_parser("list", help="catalog images and whether each is built")
    listing.set_defaults(handler=_images_list)
    importing = image_commands.add_parser(
        "import",
        help="apply the catalog file to the store's live catalog again (what running "
        "instances read; a retired version stays retired)",
    )
    importing.set_defaults(handler=_images_import)

    reconcile = commands.add_parser("reconcile", help="one reconciliation pass; a JSON summary")
    reconcile.add_argument("--dry-run", action="store_true", help="show the plan, change nothing")
    reconcile.set_defaults(handler=_reconcile)

    sandboxes = commands.add_parser("sandboxes", help="this deployment's sandboxes")
    sandbox_commands = sandboxes.add_subparsers(required=True, metavar="ACTION")
    sandbox_list = sandbox_commands.add_parser(
        "list", help="containers and workspaces this deployment created (JSON)"
    )
    sandbox_list.set_defaults(handler=_sandboxes_list)
    clean = sandbox_commands.add_parser(
        "clean", help="remove every container and workspace this deployment created"
    )
    clean.set_defaults(handler=_sandboxes_clean)

    proxy = commands.add_parser(
        "egress-proxy",
        help="run the egress proxy on its own (Kubernetes); needs SIESTA_EGRESS__KEY",
    )
    proxy.add_argument("--host", default="0.0.0.0", help="default: 0.0.0.0")
    proxy.add_argument("--port", type=int, help="default: SIESTA_EGRESS__PROXY_PORT (3128)")
    proxy.set_defaults(handler=_egress_proxy)

    config_check.add_parser(commands)
    tokens = commands.add_parser("tokens", help="API tokens")
    token_commands = tokens.add_subparsers(required=True, metavar="ACTION")
    hash_token = token_commands.add_parser(
        "hash", help="print the SHA-256 digest of the token read from stdin (for SIESTA_TOKENS)"
    )
    hash_token.set_defaults(handler=_tokens_hash)
    return parser


MCP_OPTIONS = (
    ("org", True, "organisation id"),
    ("user", True, "user id"),
    ("conversation", True, "conversation id: the session's workspace"),
    ("base-image", False, "catalog image id for a new sandbox"),
    ("agent", False, "agent id (a registered agent's configuration applies)"),
    ("egress-allow", False, "the agent's egress allowlist, comma-separated"),
    ("sub-agents", False, "sub-agents a script may call, comma-separated"),
    ("files-url", False, "the HTTP service's address, for artifact links"),
)


def _mcp(args: argparse.Namespace, settings: Settings) -> int:
    """Serves until the host closes stdin; logs go to stderr."""
    import anyio

    from runtime.core.context import CallContext
    from runtime.mcp.stdio import serve_stdio, stdio_caller
    from runtime.wiring import build_services

    def items(value: str | None) -> tuple[str, ...] | None:
        return None if value is None else tuple(p.strip() for p in value.split(",") if p.strip())

    ctx = CallContext(
        args.org,
        args.user,
        args.conversation,
        agent=args.agent or None,
        base_image=args.base_image or None,
        egress_allow=items(args.egress_allow),
        sub_agents=items(args.sub_agents) or (),
    )
    services = build_services(settings)
    try:
        ctx = services.agents.bind(ctx)  # as on the HTTP routes
        anyio.run(serve_stdio, services, stdio_caller(ctx, args.files_url))
    finally:
        services.close()
    return 0


def _egress_proxy(args: argparse.Namespace, settings: Settings) -> int:
    """Serves until SIGTERM/SIGINT; decisions are JSON lines on stdout."""
    import asyncio
    import signal

    from runtime.egress.build import egress_authority, proxy_config, store_url
    from runtime.egress.server import json_lines, serve
    from runtime.seams.store_settings import SqliteStoreSettings

    egress = settings.egress
    if egress.key is None:
        msg = "egress-proxy needs the key the service signs with (SIESTA_EGRESS__KEY)"
        raise ConfigurationError(msg)
    if not egress.enabled:
        log.warning("SIESTA_EGRESS__ALLOW is empty: every request will be refused")
    if isinstance(settings.store, SqliteStoreSettings):
        log.warning(
            "revoked credentials are read from the SQLite file %s: only deletions by a "
            "service on this host using that file reach this proxy (SIESTA_STORE__URL)",
            settings.sqlite_path,
        )
    if egress.secrets_key is not None and egress.ca_cert_file is None:
        msg = (
            "egress-proxy substitutes secrets with the service's authority: set "
            "SIESTA_EGRESS__CA_CERT_FILE and SIESTA_EGRESS__CA_KEY_FILE as for the service"
        )
        raise ConfigurationError(msg)
    config = proxy_config(
        egress,
        egress.key.get_secret_value().encode(),
        host=args.host,
        port=args.port or egress.proxy_port,
        store_url=store_url(settings.store, settings.sqlite_path),
        authority=egress_authority(egress, settings.data_dir),
    )

    async def run() -> None:
        stop = asyncio.get_running_loop().create_future()
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set_result, None)
        await serve(config, json_lines(), stop)

    asyncio.run(run())
    return 0


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    if args.create_token and settings.api_token is None:
        token = SecretStr(_token_from_file(settings.data_dir))
        settings = settings.model_copy(update={"api_token": token})
    if settings.api_token is None and not settings.tokens:
        msg = "SIESTA_API_TOKEN or SIESTA_TOKENS is required to serve; or use --create-token"
        raise ConfigurationError(msg)
    from cli.server import serve  # here: the other commands need no web framework

    return serve(settings, host=args.host or settings.http.host, port=args.port)


def _reconcile(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 after a pass (even with per-session errors); 1 when the store or the
    provider cannot be reached; 2 when settings are invalid."""
    with _services(settings) as services:
        report = services.reconciler.run(dry_run=args.dry_run)
        print(json.dumps({"deployment": services.deployment_id, **report.as_dict()}, indent=2))
    return 0


def _sandboxes_list(_: argparse.Namespace, settings: Settings) -> int:
    with _services(settings) as services:
        print(json.dumps(_owned_sandboxes(services), indent=2))
    return 0


def _sandboxes_clean(_: argparse.Namespace, settings: Settings) -> int:
    """Removes what ``sandboxes list`` shows; the session records stay, so a later
    operation of those conversations starts afresh with ``workspaceReset``."""
    with _services(settings) as services:
        owned = _owned_sandboxes(services)
        for name in sorted({*owned["sandboxes"], *owned["workspaces"]}):
            services.provider.lifecycle.destroy(name)
        if isinstance(settings.provider, DockerProviderSettings):
            from runtime.providers.docker.disks import LoopDisks
            from runtime.providers.docker.network import remove_sandbox_network

            remove_sandbox_network(settings.provider.base_url, services.deployment_id)
            LoopDisks(settings.sandbox.disk_dir / services.deployment_id).remove_spares()
        print(json.dumps({**owned, "removed": True}, indent=2))
    return 0


def _owned_sandboxes(services: Services) -> dict[str, Any]:
    # Sandboxes of versions before deployment ids carry no deployment label: the
    # session records that name them are the proof of ownership.
    recorded = {
        r.sandbox_id for r in services.stores.sessions.list_sessions() if r.status.has_sandbox
    }
    labelled = {s.sandbox_id for s in services.provider.lifecycle.list_sandboxes()}
    return {
        "deployment": services.deployment_id,
        "sandboxes": sorted(labelled | recorded),
        "workspaces": sorted(w.name for w in services.provider.lifecycle.list_workspaces()),
    }


@contextlib.contextmanager
def _services(settings: Settings) -> Iterator[Services]:
    """The runtime's parts for a one-shot command, closed at the end."""
    from runtime.wiring import build_services

    services = build_services(settings, serving=False)
    try:
        yield services
    finally:
        services.close()


def _token_from_file(data_dir: Path) -> str:
    path = data_dir / TOKEN_FILE_NAME
    if path.exists():
        token = path.read_text().strip()
        print(f"API token (from {path}): {token}", flush=True)
        return token
    data_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    print(f"API token (new, saved in {path}): {token}", flush=True)
    return token


def _tokens_hash(_: argparse.Namespace) -> int:
    """The token is read from stdin, so it stays out of the shell history and ``ps``."""
    token = sys.stdin.readline().rstrip("\r\n")
    if len(token) < MIN_TOKEN_CHARS:
        print(
            f"error: a token needs at least {MIN_TOKEN_CHARS} characters (got {len(token)}); "
            "make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'",
            file=sys.stderr,
        )
        return 2
    print(token_digest(token))
    return 0


def _images_build(args: argparse.Namespace, settings: Settings) -> int:
    from runtime.images.build import build_images

    built = build_images(
        ImageCatalog.load(settings.images.catalog_path),
        args.ids,
        progress=lambda line: print(line, flush=True),
        from_scratch=args.from_scratch,
    )
    print(f"built {len(built)} image(s): {', '.join(image.ref for image in built)}")
    refreshed = _refresh_live_catalog(settings, [image.ref for image in built])
    if refreshed:
        print(f"the live catalog now has their new digests: {', '.join(refreshed)}")
    return 0


def _refresh_live_catalog(settings: Settings, refs: list[str]) -> list[str]:
    """A deployment's live catalog (in its store) learns the digests just built, so new
    sandboxes and the warm pool take the new builds. Nothing when the deployment has no
    store yet (a first setup: the service reads the digests when it seeds)."""
    from runtime.seams.store_settings import SqliteStoreSettings

    if isinstance(settings.store, SqliteStoreSettings) and not settings.sqlite_path.exists():
        return []
    with _catalog_admin(settings) as admin:
        return admin.refresh_digests(refs)


def _images_list(_: argparse.Namespace, settings: Settings) -> int:
    import docker

    from runtime.images.build import image_summary

    print(image_summary(docker.from_env(), ImageCatalog.load(settings.images.catalog_path)))
    return 0


def _images_import(_: argparse.Namespace, settings: Settings) -> int:
    import getpass

    from runtime.admin.images import Actor

    with _catalog_admin(settings) as admin:
        result = admin.reimport(Actor(f"cli:{getpass.getuser()}", "local", "cli"))
    print(json.dumps({"added": result.added, "updated": result.updated}, indent=2))
    return 0


@contextlib.contextmanager
def _catalog_admin(settings: Settings) -> Iterator[CatalogAdmin]:
    """The deployment's live catalog, over its store, for one command."""
    from runtime.admin.audit import AuditLog
    from runtime.admin.images import CatalogAdmin
    from runtime.images.build import DockerImageBuilder
    from runtime.store import open_stores

    stores = open_stores(settings.store, settings.sqlite_path)
    try:
        docker_engine = isinstance(settings.provider, DockerProviderSettings)
        yield CatalogAdmin(
            stores.catalog,
            stores.sessions,
            stores.leases,
            AuditLog(stores.audit, settings.audit),
            settings.images,
            DockerImageBuilder() if docker_engine else None,
        )
    finally:
        stores.close()


if __name__ == "__main__":
    sys.exit(main())
