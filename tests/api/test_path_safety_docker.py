"""No read, write, list or publish reaches outside /mnt/work, whatever the path
and whatever symlinks the agent planted. Real symlinks, real Docker, real HTTP."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import ServiceProcess, headers, new_conversation, run_command

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CANARY = "SECRET-CANARY-7f3a"
OUTSIDE_NAME = "zz-outside-only"
# Listed only if a listing escaped: no generated path can create these names.
LISTING_MARKER = "zz-listing-marker"
OUTSIDE_ONLY_NAMES = {LISTING_MARKER, "bin", "usr", "sbin", "hostname", "os-release"}
# Symlinks an agent might plant, and canaries outside the workspace to catch escapes.
PLANT = f"""
set -e
echo {CANARY} > /mnt/{OUTSIDE_NAME}
echo {CANARY} > /etc/{OUTSIDE_NAME}
touch /mnt/{LISTING_MARKER} /etc/{LISTING_MARKER} /{LISTING_MARKER}
mkdir -p d/e
ln -s /etc etc-link
ln -s / root
ln -s ../.. up
ln -s /mnt mnt-link
ln -s ../../../.. d/e/up4
ln -s /mnt/work/d abs-inside
ln -s d rel-inside
ln -s /etc/{OUTSIDE_NAME} canary-link
echo inside > d/file.txt
touch /tmp/before-hostile-paths
"""
SAFE_CODES = {
    "path_outside_workspace",
    "invalid_path",
    "file_not_found",
    "not_a_file",
    "not_a_directory",
    "publish_target_missing",
}
SEGMENTS = [
    "..",
    ".",
    "",
    "etc-link",
    "root",
    "up",
    "mnt-link",
    "d",
    "e",
    "up4",
    "abs-inside",
    "rel-inside",
    "canary-link",
    "etc",
    "mnt",
    "work",
    "tmp",
    "passwd",
    OUTSIDE_NAME,
    "file.txt",
    "new",
    "proc",
    "self",
    "root",
    "\u00e9",
    "%2e%2e",
]


@pytest.fixture(scope="module", params=["docker", "gvisor"])
def service(request: pytest.FixtureRequest) -> ServiceProcess:
    """The same attacks on runc and on gVisor (where siesta-fs confines paths itself:
    that gVisor has no openat2)."""
    chosen: ServiceProcess = request.getfixturevalue(f"{request.param}_service")
    return chosen


@pytest.fixture(scope="module")
def planted(service: ServiceProcess) -> str:
    conversation = new_conversation()
    result = run_command(service.client, conversation, PLANT)
    assert result["exitCode"] == 0, result["stderr"]
    return conversation


def post(service: ServiceProcess, conversation: str, function: str, body: dict[str, Any]) -> Any:
    return service.client.post(
        f"/v1/conversations/{conversation}/sandbox/{function}", json=body, headers=headers()
    )


def assert_refused_safely(response: Any) -> None:
    assert response.status_code in (404, 413, 422), response.text
    assert response.json()["error"]["code"] in SAFE_CODES


@pytest.mark.parametrize(
    "path",
    [
        "etc-link/passwd",
        "root/etc/passwd",
        "up/etc/passwd",
        "mnt-link/" + OUTSIDE_NAME,
        "d/e/up4/etc/passwd",
        "canary-link",
        "/etc/passwd",
        "../" + OUTSIDE_NAME,
        "/mnt/work/../" + OUTSIDE_NAME,
        "abs-inside/file.txt",
    ],
)
def test_reads_through_escaping_paths_are_refused(
    service: ServiceProcess, planted: str, path: str
) -> None:
    response = post(service, planted, "readFile", {"path": path})
    assert_refused_safely(response)
    assert response.json()["error"]["code"] == "path_outside_workspace"


@pytest.mark.parametrize("path", ["etc-link", "root", "up", "mnt-link", "d/e/up4", "/", ".."])
def test_listing_escaping_folders_is_refused(
    service: ServiceProcess, planted: str, path: str
) -> None:
    response = post(service, planted, "listFiles", {"path": path})
    assert response.json()["error"]["code"] == "path_outside_workspace"


@pytest.mark.parametrize("path", ["etc-link/evil", "root/tmp/evil", "up/evil", "d/e/up4/evil"])
def test_writes_through_escaping_paths_are_refused(
    service: ServiceProcess, planted: str, path: str
) -> None:
    response = post(service, planted, "writeFile", {"path": path, "content": "PWNED"})
    assert response.json()["error"]["code"] == "path_outside_workspace"


def test_symlinks_that_stay_inside_work(service: ServiceProcess, planted: str) -> None:
    response = post(service, planted, "readFile", {"path": "rel-inside/file.txt"})
    assert response.json()["content"] == "inside\n"


# Generated paths per runtime. gVisor has no openat2, so there siesta-fs confines
# paths with its own walk: the code most worth attacking, but each example costs
# four calls of ~0.4 s under gVisor's ptrace platform (60 took 92 s of the suite's
# budget); on runc an example costs ~50 ms.
EXAMPLES = {"docker": 60, "gvisor": 20}


def test_hostile_paths_never_escape(
    service: ServiceProcess, planted: str, request: pytest.FixtureRequest
) -> None:
    canary_sha = hashlib.sha256(f"{CANARY}\n".encode()).hexdigest()

    @settings(
        max_examples=EXAMPLES[request.node.callspec.params["service"]],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        prefix=st.sampled_from(["", "/", "/mnt/work/", "./", "../"]),
        segments=st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=6),
    )
    def never_escapes(prefix: str, segments: list[str]) -> None:
        path = prefix + "/".join(segments)
        read = post(service, planted, "readFile", {"path": path})
        listed = post(service, planted, "listFiles", {"path": path})
        written = post(service, planted, "writeFile", {"path": path, "content": "PWNED"})
        published = post(service, planted, "publishFiles", {"paths": [path]})

        for response in (read, listed, written):
            if response.status_code != 200:
                assert_refused_safely(response)
        assert CANARY not in read.text
        if listed.status_code == 200:
            names = {entry["name"] for entry in listed.json()["entries"]}
            assert not names & OUTSIDE_ONLY_NAMES
        assert published.status_code == 200, published.text
        for item in published.json()["files"]:
            if "error" in item:
                assert item["error"]["code"] in SAFE_CODES | {"transfer_too_large"}
            else:
                assert item["artifact"]["sha256"] != canary_sha

    never_escapes()


def test_nothing_outside_the_workspace_changed(service: ServiceProcess, planted: str) -> None:
    # Runs after the property test in this module: every write it tried is
    # either inside /mnt/work (another mount, skipped by -xdev) or refused.
    result = run_command(
        service.client,
        planted,
        "find / -xdev -type f -newer /tmp/before-hostile-paths "
        "! -path '/proc/*' ! -path '/run/siesta/*' ! -path '/sys/*'; "
        "grep -rl PWNED /etc /mnt/" + OUTSIDE_NAME + " /tmp 2>/dev/null; "
        f"cat /etc/{OUTSIDE_NAME} /mnt/{OUTSIDE_NAME}",
    )
    assert result["stdout"] == f"{CANARY}\n{CANARY}\n"
