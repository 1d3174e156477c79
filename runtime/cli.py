"""``siesta-runtime serve | images build | images list``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from runtime import logs
from runtime.config import ImageSettings, Settings
from runtime.errors import ConfigurationError, SiestaError
from runtime.images import ImageCatalog
from runtime.store import parse_store_url

TOKEN_FILE_NAME = "api-token"


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logs.configure(logging.DEBUG if os.environ.get("SIESTA_DEBUG") else logging.INFO)
    try:
        result: int = args.handler(args)
    except SiestaError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 1
    return result


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="siesta-runtime", description=__doc__)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the HTTP API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument(
        "--create-token",
        action="store_true",
        help="without SIESTA_API_TOKEN: use DATA_DIR/api-token, creating a random one",
    )
    serve.set_defaults(handler=_serve)

    images = commands.add_parser("images", help="the base-image catalog")
    image_commands = images.add_subparsers(required=True, metavar="ACTION")
    build = image_commands.add_parser("build", help="build catalog images (all, or the ids given)")
    build.add_argument("ids", nargs="*", metavar="ID")
    build.set_defaults(handler=_images_build)
    listing = image_commands.add_parser("list", help="catalog images and whether each is built")
    listing.set_defaults(handler=_images_list)

    reconcile = commands.add_parser(
        "reconcile", help="one reconciliation pass; prints a JSON summary"
    )
    reconcile.add_argument("--dry-run", action="store_true", help="show the plan, change nothing")
    reconcile.set_defaults(handler=_reconcile)
    return parser


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    if args.create_token and not os.environ.get("SIESTA_API_TOKEN"):
        os.environ["SIESTA_API_TOKEN"] = _token_from_file()
    # Refuse bad settings here, readably, rather than inside uvicorn's start-up.
    try:
        settings = Settings()
        parse_store_url(settings.store_url)
        if settings.api_token is None:
            msg = "SIESTA_API_TOKEN (api_token) is required to serve; or use --create-token"
            raise ConfigurationError(msg)
    except ValidationError as exc:
        print(f"error: invalid settings (SIESTA_* environment):\n{exc}", file=sys.stderr)
        return 2
    except ConfigurationError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    # By name, so that runtime/ does not import api/.
    uvicorn.run(
        "api.app:create_app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        log_config=None,  # keep the JSON logging configured above
    )
    return 0


def _reconcile(args: argparse.Namespace) -> int:
    """Exit 0 after a pass (even with per-session errors); 1 when the store or the
    provider cannot be reached, or settings are invalid."""
    from runtime.services import Services

    try:
        services = Services.build(Settings())
    except ValidationError as exc:
        print(f"error: invalid settings (SIESTA_* environment):\n{exc}", file=sys.stderr)
        return 1
    try:
        report = services.reconciler.run(dry_run=args.dry_run)
    finally:
        services.close()
    print(json.dumps(report.as_dict(), indent=2))
    return 0


def _token_from_file() -> str:
    data_dir = Path(os.environ.get("SIESTA_DATA_DIR", ".siesta"))
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


def _catalog() -> ImageCatalog:
    path = os.environ.get("SIESTA_IMAGES__CATALOG_PATH")
    return ImageCatalog.load(Path(path) if path else ImageSettings().catalog_path)


def _images_build(args: argparse.Namespace) -> int:
    from runtime.imagebuild import build_images

    built = build_images(_catalog(), args.ids, progress=lambda line: print(line, flush=True))
    print(f"built {len(built)} image(s): {', '.join(image.id for image in built)}")
    return 0


def _images_list(_: argparse.Namespace) -> int:
    import docker

    from runtime.imagebuild import image_summary

    print(image_summary(docker.from_env(), _catalog()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
