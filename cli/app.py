"""The HTTP app over the runtime the composition root builds (``runtime.wiring``):
``api`` never imports it, so its entry points hand it in."""

from __future__ import annotations

import logging

from fastapi import FastAPI

from api.app import create_app
from cli import config_check
from runtime.settings import Settings
from runtime.wiring import build_services

log = logging.getLogger("cli.serve")


def app_over(settings: Settings) -> FastAPI:
    """The app ``siesta-runtime serve`` runs; its lifespan builds the runtime."""
    config_check.warn_unknown(log)
    return create_app(settings, build_services)


def create_app_from_env() -> FastAPI:
    """Factory for ``uvicorn --factory cli.app:create_app_from_env``: settings from
    the ``SIESTA_*`` environment."""
    return app_over(Settings())
