"""Every failure of the Kubernetes client becomes a runtime error here, in one place."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException
from websocket import WebSocketException

from runtime.core.errors import (
    CapacityUnavailable,
    ImageUnavailable,
    ProviderUnavailable,
    ProvisioningFailed,
    SandboxUnavailable,
)


@contextlib.contextmanager
def kubernetes_errors() -> Iterator[None]:
    """Translate every failure of the client into a runtime error.

    As on Docker: a pod or claim that is gone, or changed under the call, is
    ``sandbox_unavailable`` (the next operation finds it missing or stopped and
    replaces or resumes it); anything else the API server refuses, or not
    reaching it, is ``provider_unavailable``.
    """
    try:
        yield
    except ApiException as exc:
        if exc.status == 404:
            msg = f"the sandbox vanished during the operation; try again ({explain(exc)})"
            raise SandboxUnavailable(msg) from exc
        if exc.status == 409:
            msg = f"the sandbox changed state during the operation; try again ({explain(exc)})"
            raise SandboxUnavailable(msg) from exc
        msg = f"the Kubernetes API refused the request: {explain(exc)}"
        raise ProviderUnavailable(msg) from exc
    except (urllib3.exceptions.HTTPError, WebSocketException, OSError) as exc:
        msg = f"the Kubernetes API is not reachable: {exc}"
        raise ProviderUnavailable(msg) from exc


@contextlib.contextmanager
def unless_missing() -> Iterator[None]:
    """A 404 (the object is not there) is not an error here."""
    try:
        yield
    except ApiException as exc:
        if exc.status != 404:
            raise


@contextlib.contextmanager
def provisioning_errors() -> Iterator[None]:
    """While creating, a quota the cluster enforces is ``capacity_unavailable``
    and any other refusal is a provisioning failure (the spec is wrong for this
    cluster: a storage class that does not exist, a runtime class, a policy)."""
    try:
        yield
    except ApiException as exc:
        if exc.status == 403 and "exceeded quota" in explain(exc):
            msg = f"the cluster refused the sandbox: {explain(exc)}"
            raise CapacityUnavailable(msg) from exc
        if exc.status in (400, 403, 409, 422):
            msg = f"could not create the sandbox: {explain(exc)}"
            raise ProvisioningFailed(msg) from exc
        raise


def explain(exc: ApiException) -> str:
    """The API server's own message (its Status object), else the HTTP reason."""
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        message = json.loads(exc.body or "").get("message")
        if message:
            return f"{exc.status} {message}"
    return f"{exc.status} {exc.reason}"


IMAGE_PULL_FAILURES = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
START_FAILURES = {
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
}


def startup_failure(
    image: str,
    phase: str | None,
    unschedulable: str | None,
    waiting: tuple[str, str] | None,
) -> Exception | None:
    """Why a starting pod will not run, as the error the caller gets (``None``:
    it may still start). ``unschedulable``: the scheduler's message; ``waiting``:
    the container's waiting (reason, message)."""
    if unschedulable is not None:
        msg = f"the cluster has no node with room for the sandbox: {unschedulable}"
        return CapacityUnavailable(msg)
    if waiting is not None:
        reason, message = waiting
        if reason in IMAGE_PULL_FAILURES:
            msg = f"the cluster cannot pull base image {image}: {reason}: {message}"
            return ImageUnavailable(msg, imageRef=image)
        if reason in START_FAILURES:
            return ProvisioningFailed(f"the sandbox could not start: {reason}: {message}")
    if phase in ("Failed", "Succeeded"):
        return ProvisioningFailed(f"the sandbox pod ended while starting (phase {phase})")
    return None
