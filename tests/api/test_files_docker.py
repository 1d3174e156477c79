"""The file workflow end to end: real HTTP, a real service process, each real
provider (Docker; Kubernetes on the API server double, its pods on Docker)."""

from __future__ import annotations

import base64
import hashlib
import struct
import zlib
from typing import Any

import docker
import pytest

from runtime.seams.providers import CONVERSATION_LABEL
from tests.helpers import (
    ServiceProcess,
    StartService,
    call,
    headers,
    new_conversation,
    run_command,
    run_resources,
    upload,
)

pytestmark = pytest.mark.docker

SALES = b"region,amount\nnorth, 10\nsouth,\nnorth,5\n"


def tiny_png() -> bytes:
    """A real 1x1 PNG (with NUL and high bytes: not UTF-8)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def download(service: ServiceProcess, conversation: str, file_id: str, org: str = "org-a") -> Any:
    return service.client.get(
        f"/v1/conversations/{conversation}/files/{file_id}/content", headers=headers(org=org)
    )


def test_sales_csv_workflow_end_to_end(sandbox_service: ServiceProcess) -> None:
    client = sandbox_service.client
    conversation = new_conversation()
    uploaded = upload(client, conversation, "sales.csv", SALES, content_type="text/csv")

    staged = run_command(
        client, conversation, "wc -l < /mnt/work/in/sales.csv", files=["sales.csv"]
    )
    path = staged["stagedFiles"][0]["path"]
    original = call(client, conversation, "readFile", {"path": path})
    cleaning = (
        f'awk -F, \'NR==1 || $2 != "" {{gsub(/ /, ""); print}}\' {path} '
        "> /mnt/work/cleaned-sales.csv && cat /mnt/work/cleaned-sales.csv"
    )
    cleaned = run_command(client, conversation, cleaning)
    published = call(client, conversation, "publishFiles", {"paths": ["cleaned-sales.csv"]})
    listed = client.get(f"/v1/conversations/{conversation}/files", headers=headers()).json()

    assert staged["stagedFiles"] == [
        {
            "name": "sales.csv",
            "fileId": uploaded["id"],
            "path": "/mnt/work/in/sales.csv",
            "size": len(SALES),
        }
    ]
    assert staged["stdout"] == "4\n"
    assert original["content"] == SALES.decode() and original["encoding"] == "utf-8"
    assert cleaned["stdout"] == "region,amount\nnorth,10\nnorth,5\n"
    assert published["partial"] is False and published["published"] == 1
    artifact = published["files"][0]["artifact"]
    assert artifact["name"] == "cleaned-sales.csv"
    assert artifact["contentType"] == "text/csv"
    assert artifact["size"] == len(cleaned["stdout"])
    assert [(f["name"], f["kind"]) for f in listed["files"]] == [
        ("sales.csv", "attachment"),
        ("cleaned-sales.csv", "artifact"),
    ]
    response = download(sandbox_service, conversation, artifact["id"])
    assert response.content == cleaned["stdout"].encode()
    assert response.headers["content-type"].startswith("text/csv")
    assert "cleaned-sales.csv" in response.headers["content-disposition"]


def test_binary_round_trip_is_byte_identical(sandbox_service: ServiceProcess) -> None:
    client = sandbox_service.client
    conversation = new_conversation()
    png = tiny_png()
    upload(client, conversation, "dot.png", png, content_type="image/png")
    run_command(client, conversation, "cp in/dot.png made.png", files=["dot.png"])

    read = call(client, conversation, "readFile", {"path": "made.png"})
    published = call(client, conversation, "publishFiles", {"paths": ["made.png"]})
    artifact = published["files"][0]["artifact"]

    assert read["encoding"] == "base64"
    assert base64.b64decode(read["content"]) == png
    assert (read["size"], read["truncated"]) == (len(png), False)
    assert artifact["contentType"] == "image/png"
    assert artifact["sha256"] == hashlib.sha256(png).hexdigest()
    assert download(sandbox_service, conversation, artifact["id"]).content == png


def test_write_then_read_and_list(sandbox_service: ServiceProcess) -> None:
    client = sandbox_service.client
    conversation = new_conversation()
    written = call(
        client,
        conversation,
        "writeFile",
        {"path": "notes/day 1/todo.md", "content": "# Tâches\n- a\n"},
    )
    read = call(client, conversation, "readFile", {"path": "/mnt/work/notes/day 1/todo.md"})
    run_command(client, conversation, "mkdir -p notes/z && head -c 100 /dev/zero > notes/b.bin")
    listed = call(client, conversation, "listFiles", {"path": "notes"})
    root = call(client, conversation, "listFiles", {})

    assert written["path"] == "/mnt/work/notes/day 1/todo.md"
    assert written["size"] == len("# Tâches\n- a\n".encode())
    assert read["content"] == "# Tâches\n- a\n"
    assert listed["entries"] == [
        {"name": "b.bin", "size": 100, "isDirectory": False, "type": "file"},
        {
            "name": "day 1",
            "size": listed["entries"][1]["size"],
            "isDirectory": True,
            "type": "directory",
        },
        {
            "name": "z",
            "size": listed["entries"][2]["size"],
            "isDirectory": True,
            "type": "directory",
        },
    ]
    assert (listed["total"], listed["truncated"]) == (3, False)
    assert [e["name"] for e in root["entries"]] == ["notes"]


def test_read_reports_truncation_and_keeps_text_text(sandbox_service: ServiceProcess) -> None:
    client = sandbox_service.client
    conversation = new_conversation()
    call(client, conversation, "writeFile", {"path": "t.txt", "content": "é" * 10})
    read = call(client, conversation, "readFile", {"path": "t.txt", "maxBytes": 5})
    assert read["truncated"] is True
    assert (read["size"], read["limitBytes"]) == (20, 5)
    assert read["encoding"] == "utf-8"
    assert read["content"] == "éé"  # the split third character is left out, not base64'd
    assert read["returnedBytes"] == 4


def test_partial_publish_reports_each_path(sandbox_service: ServiceProcess) -> None:
    client = sandbox_service.client
    conversation = new_conversation()
    run_command(client, conversation, "echo ok > good.txt; mkdir folder; ln -s /etc/passwd pw")
    result = call(
        client,
        conversation,
        "publishFiles",
        {"paths": ["good.txt", "missing.txt", "folder", "pw", "../x"]},
    )
    by_path = {item["path"]: item for item in result["files"]}

    assert (result["published"], result["failed"], result["partial"]) == (1, 4, True)
    assert by_path["good.txt"]["artifact"]["name"] == "good.txt"
    assert by_path["missing.txt"]["error"]["code"] == "publish_target_missing"
    assert by_path["folder"]["error"]["code"] == "not_a_file"
    assert by_path["pw"]["error"]["code"] == "path_outside_workspace"
    assert by_path["../x"]["error"]["code"] == "path_outside_workspace"
    names = [
        f["name"]
        for f in client.get(f"/v1/conversations/{conversation}/files", headers=headers()).json()[
            "files"
        ]
    ]
    assert names == ["good.txt"]  # the successful one stays published


def test_publishing_again_makes_a_new_artifact(sandbox_service: ServiceProcess) -> None:
    client = sandbox_service.client
    conversation = new_conversation()
    run_command(client, conversation, "echo v1 > report.txt")
    first = call(client, conversation, "publishFiles", {"paths": ["report.txt"]})
    run_command(client, conversation, "echo v2 > report.txt")
    second = call(client, conversation, "publishFiles", {"paths": ["report.txt"]})
    a, b = first["files"][0]["artifact"], second["files"][0]["artifact"]

    assert a["id"] != b["id"]
    assert download(sandbox_service, conversation, a["id"]).content == b"v1\n"
    assert download(sandbox_service, conversation, b["id"]).content == b"v2\n"


def test_staging_names_are_sanitised_and_collisions_made_unique(
    sandbox_service: ServiceProcess,
) -> None:
    client = sandbox_service.client
    conversation = new_conversation()
    a = upload(client, conversation, "my data.csv", b"a")
    b = upload(client, conversation, "my_data.csv", b"bb")
    c = upload(client, conversation, "..hidden", b"ccc")
    result = run_command(
        # find, not ls: Debian's gVisor build (2022) fails the statx that ls uses.
        client,
        conversation,
        "find in -mindepth 1 -printf '%f\\n' | sort",
        files=["my data.csv", b["id"], "..hidden", a["id"]],
    )
    assert result["stagedFiles"] == [
        {"name": "my data.csv", "fileId": a["id"], "path": "/mnt/work/in/my_data.csv", "size": 1},
        {"name": "my_data.csv", "fileId": b["id"], "path": "/mnt/work/in/my_data-2.csv", "size": 2},
        {"name": "..hidden", "fileId": c["id"], "path": "/mnt/work/in/hidden", "size": 3},
    ]
    assert result["stdout"] == "hidden\nmy_data-2.csv\nmy_data.csv\n"


def test_missing_input_fails_before_anything_runs(
    docker_service: ServiceProcess, docker_client: docker.DockerClient
) -> None:
    client = docker_service.client
    conversation = new_conversation()
    upload(client, conversation, "present.csv", b"x")
    response = client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        json={"command": "touch ran", "files": ["present.csv", "absent.csv"]},
        headers=headers(),
    )
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "missing_input"
    assert error["missing"] == ["absent.csv"]
    assert "present.csv" in error["message"]
    assert run_resources(docker_client, **{CONVERSATION_LABEL: conversation}) == ([], [])


def test_files_of_one_org_are_invisible_to_another(sandbox_service: ServiceProcess) -> None:
    client = sandbox_service.client
    conversation = new_conversation()
    secret = upload(client, conversation, "secret.txt", b"a's secret", org="org-a")

    assert download(sandbox_service, conversation, secret["id"], org="org-b").status_code == 404
    listed = client.get(f"/v1/conversations/{conversation}/files", headers=headers(org="org-b"))
    assert listed.json() == {"files": []}
    response = client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        json={"command": "true", "files": [secret["id"]]},
        headers=headers(org="org-b"),
    )
    assert response.json()["error"]["code"] == "missing_input"


def test_deleting_the_conversation_deletes_its_files(sandbox_service: ServiceProcess) -> None:
    client = sandbox_service.client
    conversation = new_conversation()
    uploaded = upload(client, conversation, "a.txt", b"data")
    run_command(client, conversation, "echo out > o.txt")
    call(client, conversation, "publishFiles", {"paths": ["o.txt"]})
    blobs = list((sandbox_service.data_dir / "blobs").rglob("*"))
    assert any(path.name == uploaded["id"] for path in blobs)

    deleted = client.delete(f"/v1/conversations/{conversation}", headers=headers()).json()

    assert deleted["deletedFiles"] == 2
    assert download(sandbox_service, conversation, uploaded["id"]).status_code == 404
    remaining = [p.name for p in (sandbox_service.data_dir / "blobs").rglob("*") if p.is_file()]
    assert uploaded["id"] not in remaining


@pytest.fixture(scope="module")
def small_limits(start_service: StartService, docker_client: docker.DockerClient) -> ServiceProcess:
    return start_service(
        "docker",
        SIESTA_FILES__MAX_WRITE_BYTES="100",
        SIESTA_FILES__MAX_PUBLISH_BYTES="1000",
        SIESTA_FILES__MAX_STAGE_FILE_BYTES="1000",
        SIESTA_FILES__MAX_STAGE_TOTAL_BYTES="1500",
        SIESTA_FILES__MAX_UPLOAD_BYTES="2000",
        SIESTA_FILES__MAX_LIST_ENTRIES="3",
        SIESTA_FILES__MAX_READ_BYTES="10",
        SIESTA_FILES__MAX_STAGED_BYTES_PER_CONVERSATION="2000",
    )


def limit_error(response: Any, limit: int) -> dict[str, Any]:
    assert response.status_code == 413, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == "transfer_too_large"
    assert error["limit"] == limit
    assert str(limit) in error["message"]
    return error


def test_write_over_the_limit_says_to_use_a_command(small_limits: ServiceProcess) -> None:
    response = small_limits.client.post(
        f"/v1/conversations/{new_conversation()}/sandbox/writeFile",
        json={"path": "big.txt", "content": "x" * 101},
        headers=headers(),
    )
    assert "command" in limit_error(response, 100)["message"]


def test_publish_over_the_limit(small_limits: ServiceProcess) -> None:
    client = small_limits.client
    conversation = new_conversation()
    run_command(client, conversation, "head -c 1001 /dev/zero > big.bin; echo s > small.txt")
    result = call(client, conversation, "publishFiles", {"paths": ["big.bin", "small.txt"]})
    assert result["partial"] is True
    error = result["files"][0]["error"]
    assert (error["code"], error["limit"]) == ("transfer_too_large", 1000)
    listed = client.get(f"/v1/conversations/{conversation}/files", headers=headers()).json()
    assert [f["name"] for f in listed["files"]] == ["small.txt"]


def test_staging_limits_per_file_and_per_call(small_limits: ServiceProcess) -> None:
    client = small_limits.client
    conversation = new_conversation()
    upload(client, conversation, "big.bin", b"x" * 1001)
    upload(client, conversation, "a.bin", b"x" * 800)
    upload(client, conversation, "b.bin", b"x" * 800)
    url = f"/v1/conversations/{conversation}/sandbox/runCommand"

    per_file = client.post(
        url, json={"command": "touch ran", "files": ["big.bin"]}, headers=headers()
    )
    per_call = client.post(
        url, json={"command": "touch ran", "files": ["a.bin", "b.bin"]}, headers=headers()
    )
    limit_error(per_file, 1000)
    limit_error(per_call, 1500)
    assert (
        run_command(client, conversation, "ls ran in 2>&1; true")["stdout"].count("No such file")
        == 2
    )


def test_upload_over_the_limit(small_limits: ServiceProcess) -> None:
    conversation = new_conversation()
    response = small_limits.client.post(
        f"/v1/conversations/{conversation}/files",
        files={"file": ("big.bin", b"x" * 2001)},
        headers=headers(),
    )
    limit_error(response, 2000)
    listed = small_limits.client.get(f"/v1/conversations/{conversation}/files", headers=headers())
    assert listed.json() == {"files": []}


def test_long_listings_and_reads_are_cut_and_say_so(small_limits: ServiceProcess) -> None:
    client = small_limits.client
    conversation = new_conversation()
    run_command(client, conversation, "touch e d c b a; printf 0123456789abcdef > n.txt")
    listed = call(client, conversation, "listFiles", {})
    read = call(client, conversation, "readFile", {"path": "n.txt", "maxBytes": 1000})
    assert [e["name"] for e in listed["entries"]] == ["a", "b", "c"]
    assert (listed["total"], listed["truncated"], listed["limitEntries"]) == (6, True, 3)
    assert (read["content"], read["size"], read["truncated"]) == ("0123456789", 16, True)
    assert read["limitBytes"] == 10


def test_staging_is_capped_per_conversation_across_calls(small_limits: ServiceProcess) -> None:
    client = small_limits.client
    conversation = new_conversation()
    for name in ("a.bin", "b.bin", "c.bin"):
        upload(client, conversation, name, b"x" * 800)
    run_command(client, conversation, "true", files=["a.bin"])
    run_command(client, conversation, "true", files=["b.bin"])
    run_command(client, conversation, "true", files=["a.bin"])  # staged again: counts once
    refused = client.post(
        f"/v1/conversations/{conversation}/sandbox/runCommand",
        json={"command": "touch ran", "files": ["c.bin"]},
        headers=headers(),
    )
    error = limit_error(refused, 2000)
    assert (error["unit"], error["scope"], error["stagedBytes"], error["requestedBytes"]) == (
        "bytes",
        "conversation",
        1600,
        800,
    )
    listing = run_command(client, conversation, "ls in; ls ran 2>&1; true")["stdout"]
    assert listing.split()[:2] == ["a.bin", "b.bin"] and "No such file" in listing
    other = new_conversation()  # another conversation has its own total
    upload(client, other, "c.bin", b"x" * 800)
    assert run_command(client, other, "true", files=["c.bin"])["stagedFiles"][0]["size"] == 800


def execute(
    service: ServiceProcess, conversation: str, function: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    """``/v1/tools/execute``: the path through the function's adapter."""
    response = service.client.post(
        "/v1/tools/execute",
        headers=headers(),
        json={
            "conversationId": conversation,
            "agent": {"id": "agent-1", "systemToolIds": ["sandbox"], "baseImage": "debian-base"},
            "user": {"id": "user-1", "role": "User"},
            "function": function,
            "arguments": arguments,
        },
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_read_file_pages_through_a_large_file_with_offsets(small_limits: ServiceProcess) -> None:
    conversation = new_conversation()
    text = "Grüße aus Köln, 世界 " * 3
    run_command(small_limits.client, conversation, f"printf '%s' '{text}' > t.txt")
    pages, offset = [], 0
    while True:
        page = execute(small_limits, conversation, "readFile", {"path": "t.txt", "offset": offset})
        assert page["ok"], page
        result = page["result"]
        assert result["returnedBytes"] <= result["limitBytes"] == 10
        assert result["size"] == len(text.encode())
        pages.append(result["content"])
        if result["nextOffset"] is None:
            assert result["truncated"] is False
            break
        assert result["truncated"] is True and result["nextOffset"] > offset
        offset = result["nextOffset"]
    assert "".join(pages) == text
    inside = execute(small_limits, conversation, "readFile", {"path": "t.txt", "offset": 3})
    assert (inside["result"]["offset"], inside["result"]["content"][:3]) == (4, "ße ")
    past = execute(small_limits, conversation, "readFile", {"path": "t.txt", "offset": 10**6})
    assert past["ok"] is False
    assert (past["error"]["code"], past["error"]["size"]) == (
        "offset_past_end",
        len(text.encode()),
    )
