"""The HTTP app over the runtime the composition root builds (``runtime.wiring``):
``api`` never imports it, so its entry points hand it in."""

from __future__ import annotations

from fastapi import FastAPI

from api.app import create_app
from runtime.settings import Settings
from runtime.wiring import build_services


def app_over(settings: Settings) -> FastAPI:
    """The app ``siesta-runtime serve`` runs; its lifespan builds the runtime."""
    return create_app(settings, build_services)


def create_app_from_env() -> FastAPI:
    """Factory for ``uvicorn --factory cli.app:create_app_from_env``: settings from
    the ``SIESTA_*`` environment."""
    return app_over(Settings())
