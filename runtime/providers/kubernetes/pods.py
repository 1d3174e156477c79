"""Waiting for a sandbox's pod: watched, not polled, until it runs, fails or goes.

A wait lists the pod, then watches from the list's version, so nothing in between
is missed. What ends it is a ``PodSettled`` predicate, which may raise to end the
wait with an error (an image that cannot be pulled, no room in the cluster).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import kubernetes.client
import kubernetes.watch
from kubernetes.client import V1Pod
from kubernetes.client.exceptions import ApiException

from runtime.core.errors import ResumeTimeout, SandboxUnavailable
from runtime.providers.kubernetes.errors import kubernetes_errors, startup_failure
from runtime.providers.kubernetes.objects import going, meta

RELIST_PAUSE_SECONDS = 0.1
ENDED_PHASES = frozenset({"Failed", "Succeeded", "Unknown"})
"""Phases of a pod that will not run again (``Unknown``: its node stopped reporting)."""

PodSettled = Callable[["V1Pod | None"], bool]
"""Given the pod (``None``: it does not exist), whether the wait is over."""


class PodWatch:
    """Waits on the pods of one namespace."""

    def __init__(self, core: kubernetes.client.CoreV1Api, namespace: str, timeout: float) -> None:
        self._core = core
        self._namespace = namespace
        self._timeout = timeout

    def until(self, name: str, limit: float, settled: PodSettled) -> bool:
        """Watch the pod until ``settled`` says so (list, then watch from the list's
        version, so nothing in between is missed); False when ``limit`` passes first.
        ``settled`` may raise to end the wait with an error."""
        deadline = time.monotonic() + limit
        field = f"metadata.name={name}"
        while True:
            with kubernetes_errors():
                listed = self._core.list_namespaced_pod(
                    self._namespace, field_selector=field, _request_timeout=self._timeout
                )
            if settled(listed.items[0] if listed.items else None):
                return True
            version: str | None = listed.metadata.resource_version if listed.metadata else None
            while version is not None and (left := deadline - time.monotonic()) > 0:
                done, version = self._watch(field, version, left, settled)
                if done:
                    return True
            if time.monotonic() >= deadline:
                return False
            # The server no longer has the version to watch from: list again.
            time.sleep(RELIST_PAUSE_SECONDS)

    def _watch(
        self, field: str, version: str, seconds: float, settled: PodSettled
    ) -> tuple[bool, str | None]:
        """One watch request from ``version``: whether ``settled`` said so, and the
        version to continue from (``None``: the server no longer has ``version``)."""
        watcher = kubernetes.watch.Watch()  # type: ignore[no-untyped-call]
        try:
            with kubernetes_errors():
                try:
                    for event in watcher.stream(  # type: ignore[no-untyped-call]
                        self._core.list_namespaced_pod,
                        self._namespace,
                        field_selector=field,
                        resource_version=version,
                        timeout_seconds=max(1, math.ceil(seconds)),
                        _request_timeout=seconds + self._timeout,
                    ):
                        if event["type"] == "ERROR":
                            return False, None
                        pod = event["object"]
                        version = meta(pod).resource_version or version
                        if settled(None if event["type"] == "DELETED" else pod):
                            return True, version
                except ApiException as exc:
                    if exc.status == 410:
                        return False, None
                    raise
        finally:
            watcher.stop()  # type: ignore[no-untyped-call]
        return False, version


# -- what ends a wait --------------------------------------------------------------------


def running(pod: V1Pod) -> bool:
    status = pod.status
    if status is None or going(pod) or status.phase != "Running":
        return False
    statuses = status.container_statuses or []
    return any(s.state is not None and s.state.running is not None for s in statuses)


def running_or_failed(image: str) -> PodSettled:
    """Settled when the pod runs; raises when it will not (an image that cannot be
    pulled, no room in the cluster, a container that cannot start)."""

    def settled(pod: V1Pod | None) -> bool:
        if pod is None or going(pod):
            return False  # not made yet, or an old pod still going away
        if running(pod):
            return True
        error = startup_failure(image, *_starting_state(pod))
        if error is not None:
            raise error
        return False

    return settled


def present_and_running(pod: V1Pod | None) -> bool:
    if pod is None or going(pod):
        msg = "the sandbox's pod is gone or going; try again"
        raise SandboxUnavailable(msg)
    if pod.status is not None and pod.status.phase in ("Failed", "Succeeded"):
        msg = f"the sandbox's pod has ended ({pod.status.phase}); try again"
        raise SandboxUnavailable(msg)
    return running(pod)


def gone_or_running(pod: V1Pod | None) -> bool:
    return pod is None or running(pod)


def _starting_state(pod: V1Pod) -> tuple[str | None, str | None, tuple[str, str] | None]:
    status = pod.status
    if status is None:
        return None, None, None
    unschedulable = next(
        (
            c.message or c.reason
            for c in status.conditions or []
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
        ),
        None,
    )
    waiting = next(
        (
            (s.state.waiting.reason or "", s.state.waiting.message or "")
            for s in status.container_statuses or []
            if s.state is not None and s.state.waiting is not None
        ),
        None,
    )
    return status.phase, unschedulable, waiting


def resume_timeout(limit: float) -> ResumeTimeout:
    msg = f"resuming the sandbox took longer than the limit of {limit:g} seconds"
    return ResumeTimeout(msg, limit=limit, unit="seconds")
