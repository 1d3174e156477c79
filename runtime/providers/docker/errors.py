"""Every failure of the Docker SDK becomes a runtime error here, in one place."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import docker
import docker.errors
import requests.exceptions

from runtime.core.errors import ProviderUnavailable, SandboxUnavailable


@contextlib.contextmanager
def docker_errors() -> Iterator[None]:
    """Translate every failure of the SDK into a runtime error, in one place.

    A sandbox that is gone or not running when the call reaches the engine (it
    vanished or stopped after the state check) is ``sandbox_unavailable``: the
    next operation finds it missing or stopped and replaces or resumes it.
    ``ImageNotFound`` passes through for ``create`` to name the image.
    """
    try:
        yield
    except docker.errors.ImageNotFound:
        raise
    except docker.errors.NotFound as exc:
        msg = f"the sandbox vanished during the operation; try again ({explain(exc)})"
        raise SandboxUnavailable(msg) from exc
    except docker.errors.APIError as exc:
        explanation = explain(exc)
        if exc.status_code == 409:
            msg = f"the sandbox changed state during the operation; try again ({explanation})"
            raise SandboxUnavailable(msg) from exc
        msg = f"the Docker engine refused the request: {explanation}"
        raise ProviderUnavailable(msg) from exc
    except (requests.exceptions.RequestException, docker.errors.DockerException) as exc:
        msg = f"the Docker engine is not reachable: {exc}"
        raise ProviderUnavailable(msg) from exc


def explain(exc: docker.errors.APIError) -> str:
    return str(exc.explanation or exc)
