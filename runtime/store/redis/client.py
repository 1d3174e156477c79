"""The Redis connection every concern shares, and its error translation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import redis
import redis.exceptions

from runtime.core.errors import StateUnavailable

SOCKET_TIMEOUT_SECONDS = 10.0


def connect(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=2.0,
        health_check_interval=10,
    )


@contextlib.contextmanager
def redis_errors() -> Iterator[None]:
    """An unreachable or restarting Redis is ``state_unavailable``."""
    try:
        yield
    except (
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        redis.exceptions.BusyLoadingError,
    ) as exc:
        msg = f"the state store (Redis) is not reachable: {exc}"
        raise StateUnavailable(msg) from exc


def strings(mapping: Any) -> dict[str, str]:
    """redis-py's answers typed as bytes-or-str; with decode_responses they are str."""
    return {str(name): str(value) for name, value in dict(mapping).items()}


def pairs(flat: list[Any]) -> dict[str, str]:
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat), 2)}
