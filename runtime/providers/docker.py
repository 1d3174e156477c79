"""Sandboxes as Docker containers, through the ``docker`` SDK.

One sandbox is one container named ``siesta-<session id>`` with a Docker volume
of the same name mounted at ``/mnt/work``. Both carry, from their creation, the
deployment label (``siesta.deployment=<id>``) plus org, conversation, session
and image labels, so reconciliation finds everything this deployment created and
nothing else. Labels a container inherits from its image prove nothing: anyone
can start a container from our images.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

import docker
import docker.errors
import requests.exceptions
from docker.utils.socket import STDOUT, frames_iter

from runtime.config import SandboxSettings
from runtime.errors import (
    ImageUnavailable,
    ProviderUnavailable,
    ProvisioningFailed,
    SandboxUnavailable,
)
from runtime.output import HeadTailBuffer
from runtime.providers import fshelper
from runtime.providers.base import (
    DEPLOYMENT_LABEL,
    WORKSPACE,
    ByteSink,
    DirListing,
    ExecRequest,
    ExecResult,
    SandboxInfo,
    SandboxSpec,
    SandboxState,
    WorkspaceInfo,
)

# Root inside the sandbox keeps only what installing packages needs: changing
# file owners and modes (dpkg), and switching user (apt's _apt sandbox).
PACKAGE_INSTALL_CAPS = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID"]

PID_FILE = "/run/siesta/exec.pid"
# Runs as `sh -c WRAPPER siesta-exec TIMEOUT GRACE COMMAND`. coreutils `timeout`
# puts itself in a new process group (its pid, which is this shell's pid after
# `exec`) and on expiry signals that whole group, so background children die
# too. The pid file lets the host kill the group if the in-sandbox timer fails.
# Operations on a conversation never overlap (the lease), so a previous command
# whose `timeout` leader still runs was orphaned by a service instance that died
# or lost its lease: it is killed before the new command starts. (Background
# processes of a command that finished normally have no live leader: they stay.)
EXEC_WRAPPER = (
    f"mkdir -p /run/siesta; "
    f"if [ -f {PID_FILE} ] && read old < {PID_FILE} && "
    '[ "$(cat /proc/$old/comm 2>/dev/null)" = timeout ]; then kill -s KILL -- "-$old"; fi; '
    f"echo $$ > {PID_FILE} && "
    'exec timeout -k "$2" "$1" bash -lc "$3"'
)
TIMEOUT_EXIT_CODES = frozenset({124, 137})
# tini forwards SIGTERM; `sleep infinity` ends at once, so this is rarely waited out.
STOP_GRACE_SECONDS = 5
# How long past timeout + grace the host waits before it intervenes itself.
HOST_WATCHDOG_SLACK_SECONDS = 5.0

_STATES = {
    "running": SandboxState.RUNNING,
    "restarting": SandboxState.RUNNING,
    "paused": SandboxState.PAUSED,
    "created": SandboxState.STOPPED,
    "exited": SandboxState.STOPPED,
    "dead": SandboxState.STOPPED,
    "removing": SandboxState.MISSING,
}


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
        msg = f"the sandbox vanished during the operation; try again ({_explain(exc)})"
        raise SandboxUnavailable(msg) from exc
    except docker.errors.APIError as exc:
        explanation = _explain(exc)
        if exc.status_code == 409:
            msg = f"the sandbox changed state during the operation; try again ({explanation})"
            raise SandboxUnavailable(msg) from exc
        msg = f"the Docker engine refused the request: {explanation}"
        raise ProviderUnavailable(msg) from exc
    except (requests.exceptions.RequestException, docker.errors.DockerException) as exc:
        msg = f"the Docker engine is not reachable: {exc}"
        raise ProviderUnavailable(msg) from exc


def _explain(exc: docker.errors.APIError) -> str:
    return str(exc.explanation or exc)


class DockerProvider:
    def __init__(
        self,
        settings: SandboxSettings,
        *,
        deployment_id: str,
        base_url: str | None = None,
        client: docker.DockerClient | None = None,
    ) -> None:
        self._settings = settings
        self._deployment_id = deployment_id
        with docker_errors():
            self._client = client or (
                docker.DockerClient(base_url=base_url) if base_url else docker.from_env()
            )
        self._api = self._client.api

    def ping(self) -> None:
        with docker_errors():
            self._api.ping()

    def close(self) -> None:
        self._client.close()

    def sandbox_id_for(self, session_id: str) -> str:
        return f"siesta-{session_id}"

    def create(self, spec: SandboxSpec) -> str:
        name = self.sandbox_id_for(spec.session_id)
        labels = {
            **self._settings.extra_labels,
            **spec.labels,
            DEPLOYMENT_LABEL: self._deployment_id,
        }
        s = self._settings
        try:
            with docker_errors(), _provisioning_errors(spec.image):
                self._client.volumes.create(name=name, labels=labels)
                container = self._client.containers.create(
                    spec.image,
                    name=name,
                    hostname="sandbox",
                    labels=labels,
                    working_dir=WORKSPACE,
                    volumes={name: {"bind": WORKSPACE, "mode": "rw"}},
                    mem_limit=f"{s.memory_limit_mb}m",
                    memswap_limit=f"{s.memory_limit_mb}m",
                    nano_cpus=int(s.cpu_limit * 1e9),
                    pids_limit=s.pids_limit,
                    cap_drop=["ALL"],
                    cap_add=PACKAGE_INSTALL_CAPS,
                    security_opt=["no-new-privileges"],
                    network_mode=s.network,
                    # The catalog images run tini as PID 1 themselves (see
                    # images/*/Dockerfile); Docker's --init would stack a second one.
                    init=False,
                )
                container.start()
        except BaseException:
            self.destroy(name)
            raise
        return name

    def inspect(self, sandbox_id: str) -> SandboxInfo:
        with docker_errors():
            try:
                attrs = self._api.inspect_container(sandbox_id)
            except docker.errors.NotFound:
                return SandboxInfo(sandbox_id, SandboxState.MISSING)
        status = str(attrs["State"]["Status"])
        labels = dict(attrs["Config"].get("Labels") or {})
        return SandboxInfo(sandbox_id, _STATES.get(status, SandboxState.STOPPED), labels)

    def exec(self, sandbox_id: str, request: ExecRequest) -> ExecResult:
        argv = [
            "/bin/sh",
            "-c",
            EXEC_WRAPPER,
            "siesta-exec",
            str(request.timeout_seconds),
            str(request.kill_grace_seconds),
            request.command,
        ]
        stdout = HeadTailBuffer(request.max_output_bytes)
        stderr = HeadTailBuffer(request.max_output_bytes)
        started = time.monotonic()
        with docker_errors():
            exec_id = self._api.exec_create(
                sandbox_id,
                argv,
                stdout=True,
                stderr=True,
                stdin=False,
                tty=False,
                workdir=WORKSPACE,
            )["Id"]
            stream = self._api.exec_start(exec_id, stream=True, demux=True)
            watchdog = _Watchdog(
                request.timeout_seconds + request.kill_grace_seconds + HOST_WATCHDOG_SLACK_SECONDS,
                lambda: self._kill_command_group(sandbox_id),
                stream.close,
            )
            try:
                for out, err in stream:
                    if out:
                        stdout.write(out)
                    if err:
                        stderr.write(err)
            finally:
                watchdog.cancel()
                stream.close()
            exit_code = self._wait_exit_code(exec_id)
        duration_ms = int((time.monotonic() - started) * 1000)
        timed_out = watchdog.fired or (
            exit_code in TIMEOUT_EXIT_CODES and duration_ms >= request.timeout_seconds * 1000
        )
        return ExecResult(exit_code, stdout.result(), stderr.result(), timed_out, duration_ms)

    def read_file(
        self, sandbox_id: str, path: str, max_bytes: int, sink: ByteSink, *, strict: bool = False
    ) -> int:
        exit_code, stderr = self._exec_io(
            sandbox_id, fshelper.read_argv(path, max_bytes, strict), stdout_sink=sink
        )
        return int(fshelper.check(exit_code, stderr, path, max_bytes)["size"])

    def write_file(
        self, sandbox_id: str, path: str, chunks: Iterable[bytes], max_bytes: int
    ) -> int:
        exit_code, stderr = self._exec_io(
            sandbox_id, fshelper.write_argv(path, max_bytes), stdin_chunks=chunks
        )
        return int(fshelper.check(exit_code, stderr, path, max_bytes)["size"])

    def list_dir(self, sandbox_id: str, path: str, max_entries: int) -> DirListing:
        stdout = bytearray()
        exit_code, stderr = self._exec_io(
            sandbox_id, fshelper.list_argv(path, max_entries), stdout_sink=stdout.extend
        )
        return fshelper.parse_listing(bytes(stdout), fshelper.check(exit_code, stderr, path))

    def _exec_io(
        self,
        sandbox_id: str,
        argv: list[str],
        *,
        stdin_chunks: Iterable[bytes] | None = None,
        stdout_sink: ByteSink | None = None,
    ) -> tuple[int, str]:
        """Run a helper with its stdin fed from ``stdin_chunks``; stdout goes to the sink.

        Returns the exit code and stderr (helpers print little there).
        """
        stderr = HeadTailBuffer(16 * 1024)
        with docker_errors():
            exec_id = self._api.exec_create(
                sandbox_id,
                argv,
                stdin=stdin_chunks is not None,
                stdout=True,
                stderr=True,
                workdir=WORKSPACE,
            )["Id"]
            stream = self._api.exec_start(exec_id, socket=True)
            raw = getattr(stream, "_sock", None)
            if not isinstance(raw, socket.socket):
                stream.close()
                msg = "file transfer needs a unix or tcp connection to the Docker engine"
                raise ProviderUnavailable(msg)
            try:
                if stdin_chunks is not None:
                    _send_all(raw, stdin_chunks)
                frames = frames_iter(stream, tty=False)  # type: ignore[no-untyped-call]
                for stream_id, data in frames:
                    if stream_id == STDOUT:
                        if stdout_sink is not None:
                            stdout_sink(data)
                    else:
                        stderr.write(data)
            finally:
                stream.close()
                raw.close()
            return self._wait_exit_code(exec_id), stderr.result().text

    def _wait_exit_code(self, exec_id: str) -> int:
        # The output stream can close a moment before the engine records the exit.
        deadline = time.monotonic() + 5.0
        while True:
            info = self._api.exec_inspect(exec_id)
            if not info["Running"] and info["ExitCode"] is not None:
                return int(info["ExitCode"])
            if time.monotonic() > deadline:
                return -1
            time.sleep(0.005)

    def pause(self, sandbox_id: str) -> None:
        with docker_errors():
            self._api.pause(sandbox_id)

    def unpause(self, sandbox_id: str) -> None:
        with docker_errors():
            self._api.unpause(sandbox_id)

    def stop(self, sandbox_id: str) -> None:
        with docker_errors():
            self._api.stop(sandbox_id, timeout=STOP_GRACE_SECONDS)

    def start(self, sandbox_id: str) -> None:
        with docker_errors():
            self._api.start(sandbox_id)

    def cancel_exec(self, sandbox_id: str) -> None:
        self._kill_command_group(sandbox_id)

    def _kill_command_group(self, sandbox_id: str) -> None:
        with contextlib.suppress(
            docker.errors.DockerException, requests.exceptions.RequestException
        ):
            self._api.exec_start(
                self._api.exec_create(
                    sandbox_id,
                    ["/bin/sh", "-c", f'kill -s KILL -- "-$(cat {PID_FILE})"'],
                    stdout=False,
                    stderr=False,
                )["Id"],
                detach=True,
            )

    def destroy(self, sandbox_id: str) -> None:
        with docker_errors():
            with contextlib.suppress(docker.errors.NotFound):
                self._api.remove_container(sandbox_id, force=True, v=True)
            with contextlib.suppress(docker.errors.NotFound):
                self._api.remove_volume(sandbox_id, force=True)

    def _label_filters(self) -> dict[str, Any]:
        extra = [f"{k}={v}" for k, v in self._settings.extra_labels.items()]
        return {"label": [f"{DEPLOYMENT_LABEL}={self._deployment_id}", *extra]}

    def list_sandboxes(self) -> list[SandboxInfo]:
        with docker_errors():
            containers = self._api.containers(all=True, filters=self._label_filters())
            inherited = self._images_claiming_ownership({str(c["ImageID"]) for c in containers})
        return [
            SandboxInfo(
                str(c["Names"][0]).lstrip("/"),
                _STATES.get(str(c["State"]), SandboxState.STOPPED),
                dict(c.get("Labels") or {}),
                float(c.get("Created") or 0),
            )
            for c in containers
            if str(c["ImageID"]) not in inherited
        ]

    def _images_claiming_ownership(self, image_ids: set[str]) -> set[str]:
        """Images that carry our deployment label themselves (say, committed from a
        sandbox): their containers may have inherited it, so it proves nothing."""
        claiming = set()
        for image_id in image_ids:
            try:
                attrs = self._api.inspect_image(image_id)  # type: ignore[no-untyped-call]
                labels = attrs["Config"].get("Labels") or {}
            except docker.errors.NotFound:
                continue
            if labels.get(DEPLOYMENT_LABEL) == self._deployment_id:
                claiming.add(image_id)
        return claiming

    def list_workspaces(self) -> list[WorkspaceInfo]:
        with docker_errors():
            volumes = self._api.volumes(filters=self._label_filters()).get("Volumes") or []
        return [
            WorkspaceInfo(str(v["Name"]), dict(v.get("Labels") or {}), _timestamp(v))
            for v in volumes
        ]


@contextlib.contextmanager
def _provisioning_errors(image: str) -> Iterator[None]:
    """While creating, every refusal of the engine is a provisioning failure."""
    try:
        yield
    except docker.errors.ImageNotFound as exc:
        msg = f"base image {image} is not present on the Docker engine"
        raise ImageUnavailable(msg, imageRef=image) from exc
    except docker.errors.APIError as exc:
        msg = f"could not create the sandbox: {_explain(exc)}"
        raise ProvisioningFailed(msg) from exc


def _timestamp(volume: dict[str, Any]) -> float:
    created = str(volume.get("CreatedAt") or "")
    try:  # e.g. 2026-11-30T11:04:05Z or with an offset
        return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _send_all(raw: socket.socket, chunks: Iterable[bytes]) -> None:
    try:
        for chunk in chunks:
            raw.sendall(chunk)
        raw.shutdown(socket.SHUT_WR)  # end of stdin for the helper
    except (BrokenPipeError, ConnectionResetError):
        pass  # the helper stopped reading (a limit); its status line says why


class _Watchdog:
    """Host-side safety net for a command whose in-sandbox timeout failed.

    First kills the command's process group from outside; if the output stream
    is still open a few seconds later (a child escaped into a new session and
    holds the pipe), closes the stream so the call returns.
    """

    def __init__(self, after_seconds: float, kill: Any, close: Any) -> None:
        self.fired = False
        self._kill = kill
        self._close = close
        self._done = threading.Event()
        self._timer = threading.Timer(after_seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        self._kill()
        if not self._done.wait(HOST_WATCHDOG_SLACK_SECONDS):
            self._close()

    def cancel(self) -> None:
        self._done.set()
        self._timer.cancel()
