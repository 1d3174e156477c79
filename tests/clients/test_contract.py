"""The client's models and the server's OpenAPI document agree.

Both sides use ``siesta_contract``; this checks that nothing drifts around it: every
schema the served document shares with the contract package is the package's own
JSON Schema, every JSON body and answer of the document is a contract model, and
every call the client makes is an operation of the document with that method, path,
body model, parameters, headers and answer model.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

import siesta_contract

from api.openapi import deployment_limits
from runtime.settings import Settings
from siesta_client import _admin_calls, _calls
from siesta_client._ops import Context, Model, Op, no_content, raw_bytes
from tests.inprocess import in_process_service

REF = "#/components/schemas/"
Mode = Literal["validation", "serialization"]
SUFFIX_MODES: dict[str, Mode] = {"-Input": "validation", "-Output": "serialization"}
GENERATED_BODIES = re.compile(r"^Body_")
"""FastAPI's own schemas of form bodies (an upload's ``file`` and ``name``)."""
AGENT = {"id": "agent-1", "systemToolIds": ["sandbox"], "baseImage": "debian-base"}
USER = {"id": "user-1", "role": "User"}
CTX = Context("org-a", "user-1", "debian-base", "agent-1", ("helper",))
CALLS: dict[str, Callable[[], Op[Any]]] = {
    "run_command": lambda: _calls.run_command(CTX, "conv-1", "true", ["a.csv"], 5),
    "write_file": lambda: _calls.write_file(CTX, "conv-1", "a.txt", "text"),
    "read_file": lambda: _calls.read_file(CTX, "conv-1", "a.txt", 0, 100),
    "list_files": lambda: _calls.list_files(CTX, "conv-1", "."),
    "publish_files": lambda: _calls.publish_files(CTX, "conv-1", ["a.txt"]),
    "run_js": lambda: _calls.run_js(CTX, "conv-1", "1 + 1", 2.5),
    "upload_file": lambda: _calls.upload_file(CTX, "conv-1", "a.csv", b"a,b\n", "text/csv"),
    "list_conversation_files": lambda: _calls.list_conversation_files(CTX, "conv-1"),
    "download_file": lambda: _calls.download_file(CTX, "conv-1", "file-1"),
    "sandbox": lambda: _calls.sandbox(CTX, "conv-1"),
    "sandbox_metrics": lambda: _calls.sandbox_metrics(CTX, "conv-1"),
    "pause_sandbox": lambda: _calls.pause_sandbox(CTX, "conv-1", False),
    "resume_sandbox": lambda: _calls.resume_sandbox(CTX, "conv-1"),
    "port_access": lambda: _calls.port_access(CTX, "conv-1", 8000),
    "start_process": lambda: _calls.start_process(
        CTX, "conv-1", command="npm run dev", cwd="app", env={"PORT": "3000"}, tag="dev"
    ),
    "processes": lambda: _calls.processes(CTX, "conv-1"),
    "process": lambda: _calls.process(CTX, "conv-1", 42),
    "process_input": lambda: _calls.process_input(CTX, "conv-1", 42, "y\n", True),
    "signal_process": lambda: _calls.signal_process(CTX, "conv-1", 42, "SIGINT"),
    "network": lambda: _calls.network(CTX, "conv-1"),
    "take_snapshot": lambda: _calls.take_snapshot(CTX, "conv-1", "before", {"k": "v"}),
    "fork": lambda: _calls.fork(CTX, "conv-1", "conv-2"),
    "forks": lambda: _calls.forks(CTX, "conv-1", ["conv-2", "conv-3"]),
    "start_from_snapshot": lambda: _calls.start_from_snapshot(CTX, "conv-2", "snap1"),
    "snapshots": lambda: _calls.snapshots("org-a", "conv-1"),
    "snapshot": lambda: _calls.snapshot("org-a", "snap1"),
    "delete_snapshot": lambda: _calls.delete_snapshot("org-a", "snap1"),
    "create_memory_bank": lambda: _calls.create_memory_bank(
        "org-a", "Facts", "general", "what users said", "read_only"
    ),
    "memory_banks": lambda: _calls.memory_banks("org-a"),
    "memory_bank": lambda: _calls.memory_bank("org-a", "mem1"),
    "delete_memory_bank": lambda: _calls.delete_memory_bank("org-a", "mem1"),
    "add_memory_entry": lambda: _calls.add_memory_entry("org-a", "mem1", "k", "hi", "user"),
    "set_network": lambda: _calls.set_network(CTX, "conv-1", ["*.pypi.org"], ["x.pypi.org"], True),
    "stat": lambda: _calls.stat(CTX, "conv-1", "/etc/hosts", None),
    "list_dir": lambda: _calls.list_dir(CTX, "conv-1", "app", 3, "user"),
    "make_dir": lambda: _calls.make_dir(CTX, "conv-1", "app/src", None),
    "move": lambda: _calls.move(CTX, "conv-1", "a.txt", "/tmp/b.txt", "user"),
    "remove": lambda: _calls.remove(CTX, "conv-1", "app", None),
    "watch": lambda: _calls.watch(CTX, "conv-1", "app", _calls.WatchOptions(True, True), None),
    "set_metadata": lambda: _calls.set_metadata(CTX, "conv-1", "a.txt", {"k": "v"}, "user"),
    "watcher_changes": lambda: _calls.watcher_changes(CTX, "conv-1", "w1", 5),
    "stop_watching": lambda: _calls.stop_watching(CTX, "conv-1", "w1"),
    "delete": lambda: _calls.delete(CTX, "conv-1"),
    "catalog": lambda: _calls.catalog(AGENT, USER, "strict", org="org-a"),
    "approvals": lambda: _calls.approvals("org-a", "conv-1", 10),
    "register_agent": lambda: _calls.register_agent("org-a", AGENT),
    "agents": lambda: _calls.agents("org-a"),
    "catalog_images": _admin_calls.catalog_images,
    "catalog_image": lambda: _admin_calls.catalog_image("python:1"),
    "add_catalog_image": lambda: _admin_calls.add_catalog_image(
        {"id": "node", "tag": "20", "title": "Node", "source": {"dockerfile": "FROM x\n"}}
    ),
    "set_image_state": lambda: _admin_calls.set_image_state("python:1", "retired"),
    "make_default_image": lambda: _admin_calls.make_default_image("python:1"),
    "build_catalog_image": lambda: _admin_calls.build_catalog_image("python:1", True),
    "image_build": lambda: _admin_calls.image_build("0" * 32, 5),
    "import_catalog": _admin_calls.import_catalog,
    "audit": lambda: _admin_calls.audit("ops", "image.", "python:1", 12.5, 10),
    "agent": lambda: _calls.agent("org-a", "agent-1"),
    "delete_agent": lambda: _calls.delete_agent("org-a", "agent-1"),
    "approval": lambda: _calls.approval("org-a", "approval-1"),
    "execute": lambda: _calls.execute("org-a", "conv-1", AGENT, USER, "runCommand", {}),
    "decide": lambda: _calls.decide("org-a", "approval-1", True, "u1"),
    "executions": lambda: _calls.executions(
        "org-a", conversationId="conv-1", function="runCommand", status="succeeded", limit=5
    ),
}
"""Every call of the client, with arguments of the right shape."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Settings]:
    """The OpenAPI document as the service serves it, and the service's settings."""
    data = tmp_path_factory.mktemp("contract")
    with in_process_service(data, {"SIESTA_PROVIDER__TYPE": "fake"}) as service:
        response = service.client.get("/openapi.json")
        assert response.status_code == 200, response.text
        settings: Settings = service.client.app.state.services.settings  # type: ignore[attr-defined]
        return response.json(), settings


@pytest.fixture(scope="module")
def document(served: tuple[dict[str, Any], Settings]) -> dict[str, Any]:
    return served[0]


def contract_models() -> dict[str, type[BaseModel]]:
    """Every model of the contract package, by name (a name used twice is left out:
    the document would name it with its module)."""
    found: dict[str, list[type[BaseModel]]] = {}
    for module in _contract_modules():
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseModel) and cls.__module__ == module.__name__:
                found.setdefault(cls.__name__, []).append(cls)
    return {name: classes[0] for name, classes in found.items() if len(classes) == 1}


def _contract_modules() -> Iterator[Any]:
    yield siesta_contract
    for info in pkgutil.walk_packages(siesta_contract.__path__, "siesta_contract."):
        yield importlib.import_module(info.name)


def test_shared_schemas_are_the_contracts_own(served: tuple[dict[str, Any], Settings]) -> None:
    document, settings = served
    models = contract_models()
    components: dict[str, Any] = document["components"]["schemas"]
    uses = _uses(document)
    shared = {name: uses[name] for name in components if _base(name) in models}
    assert len(shared) > 20, f"the document shares few schemas with the contract: {shared}"
    expected = _contract_schemas({(models[_base(name)], mode) for name, mode in shared.items()})
    # What the served document adds, and only that: this deployment's enabled images
    # and its count limits (api/openapi.py).
    enabled = _catalog_enum(components)
    assert enabled, "the catalog's enabled images are in the document"
    expected["ImageSelection"]["properties"]["baseImage"]["enum"] = enabled
    for (model, field), keywords in deployment_limits(settings).items():
        expected[model]["properties"][field].update(keywords)
    for name in shared:
        assert components[name] == expected[name], f"{name} differs from the contract's"


def test_every_json_body_and_answer_is_a_contract_model(document: dict[str, Any]) -> None:
    models = contract_models()
    for path, method, operation in _operations(document):
        for schema in _json_schemas(operation):
            name = _ref_name(schema)
            assert name is not None, f"{method} {path}: an inline JSON schema {schema}"
            assert _base(name) in models or GENERATED_BODIES.match(name), (
                f"{method} {path}: {name} is not a model of siesta_contract"
            )


def test_every_call_of_the_client_is_an_operation_of_the_document(
    document: dict[str, Any],
) -> None:
    public = {
        name
        for module in (_calls, _admin_calls)
        for name, function in inspect.getmembers(module, inspect.isfunction)
        if function.__module__ == module.__name__ and not name.startswith("_")
    }
    assert public == set(CALLS), "every call of the client has an example here"
    for name, make in CALLS.items():
        op = make()
        template, operation = _operation_for(document, op)
        where = f"{name}: {op.method} {template}"
        _check_body(where, op, operation, document["components"]["schemas"])
        _check_parameters(where, op, operation)
        _check_answer(where, op, operation)


def _check_body(
    where: str, op: Op[Any], operation: dict[str, Any], components: dict[str, Any]
) -> None:
    content = operation.get("requestBody", {}).get("content", {})
    if op.json is not None:
        assert op.body is not None, f"{where}: a JSON body without its contract model"
        schema = content.get("application/json", {}).get("schema", {})
        assert _base(_ref_name(schema) or "") == op.body.__name__, f"{where}: body model"
        op.body.model_validate(op.json)
    elif op.files is not None:
        form = components[_ref_name(content["multipart/form-data"]["schema"]) or ""]
        assert set(op.files) <= set(form["properties"]), f"{where}: form fields"
        assert set(form.get("required", [])) <= set(op.files), f"{where}: required fields"
    else:
        assert not operation.get("requestBody", {}).get("required"), f"{where}: body required"


def _check_parameters(where: str, op: Op[Any], operation: dict[str, Any]) -> None:
    parameters = operation.get("parameters", [])
    query = {p["name"] for p in parameters if p["in"] == "query"}
    assert set(op.params or {}) <= query, f"{where}: query parameters {set(op.params or {})}"
    headers = {p["name"].lower(): p for p in parameters if p["in"] == "header"}
    sent = {name.lower() for name in op.headers}
    assert sent <= set(headers), f"{where}: headers {sent - set(headers)} are not declared"
    required = {name for name, p in headers.items() if p.get("required")}
    assert required <= sent, f"{where}: required headers {required - sent} are not sent"


def _check_answer(where: str, op: Op[Any], operation: dict[str, Any]) -> None:
    success = [r for status, r in operation["responses"].items() if status.startswith("2")]
    assert success, f"{where}: no success answer"
    content = success[0].get("content", {})
    if isinstance(op.read, Model):
        schema = content.get("application/json", {}).get("schema", {})
        assert _base(_ref_name(schema) or "") == op.read.cls.__name__, f"{where}: answer"
    else:
        assert op.read in (raw_bytes, no_content) and "application/json" not in content, where


def _operation_for(document: dict[str, Any], op: Op[Any]) -> tuple[str, dict[str, Any]]:
    for template, item in document["paths"].items():
        literal = re.split(r"\{[^}]+\}", template)
        pattern = "[^/]+".join(re.escape(part) for part in literal)
        if re.fullmatch(pattern, op.path) and op.method.lower() in item:
            return template, item[op.method.lower()]
    pytest.fail(f"the document has no {op.method} {op.path}")


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            yield path, method.upper(), operation


def _json_schemas(operation: dict[str, Any]) -> Iterator[dict[str, Any]]:
    bodies = [operation.get("requestBody", {})]
    bodies += list(operation.get("responses", {}).values())
    for body in bodies:
        for media, content in body.get("content", {}).items():
            if media == "application/json":
                yield content["schema"]


def _uses(document: dict[str, Any]) -> dict[str, Mode]:
    """The mode each component is generated in: what a request sends is validated,
    what an answer carries is serialized (FastAPI names a model used both ways, when
    the two differ, ``-Input`` and ``-Output``)."""
    uses: dict[str, Mode] = {}
    components = document["components"]["schemas"]
    for _, _, operation in _operations(document):
        request = operation.get("requestBody", {}).get("content", {})
        for media in request.values():
            _mark(media["schema"], "validation", components, uses)
        for parameter in operation.get("parameters", []):
            _mark(parameter.get("schema", {}), "validation", components, uses)
        for answer in operation.get("responses", {}).values():
            for media in answer.get("content", {}).values():
                _mark(media.get("schema", {}), "serialization", components, uses)
    return uses


def _mark(node: Any, mode: Mode, components: dict[str, Any], uses: dict[str, Mode]) -> None:
    if isinstance(node, list):
        for item in node:
            _mark(item, mode, components, uses)
    elif isinstance(node, dict):
        name = _ref_name(node)
        if name is not None and name not in uses:
            uses[name] = SUFFIX_MODES.get(name[-7:], SUFFIX_MODES.get(name[-6:], mode))
            _mark(components[name], mode, components, uses)
        for value in node.values():
            _mark(value, mode, components, uses)


def _contract_schemas(pairs: set[tuple[type[BaseModel], Mode]]) -> dict[str, Any]:
    _, schema = models_json_schema(
        sorted(pairs, key=lambda pair: (pair[0].__name__, pair[1])),
        ref_template=REF + "{model}",
    )
    definitions: dict[str, Any] = _without_nulls(schema["$defs"])
    return definitions


def _without_nulls(node: Any) -> Any:
    """As FastAPI writes the document (``exclude_none``): ``"default": null`` and any
    other null-valued keyword left out (an absent default means the same)."""
    if isinstance(node, dict):
        return {key: _without_nulls(value) for key, value in node.items() if value is not None}
    if isinstance(node, list):
        return [_without_nulls(item) for item in node]
    return node


def _catalog_enum(components: dict[str, Any]) -> list[str] | None:
    selection = components.get("ImageSelection", {})
    enum: list[str] | None = selection.get("properties", {}).get("baseImage", {}).get("enum")
    return enum


def _ref_name(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return str(ref).removeprefix(REF) if isinstance(ref, str) else None


def _base(name: str) -> str:
    return name.removesuffix("-Input").removesuffix("-Output")


def test_the_contract_package_imports_only_pydantic() -> None:
    """The standard library and pydantic, nothing else (the clean-venv test installs it)."""
    allowed = {"pydantic", "siesta_contract", *sys.stdlib_module_names}
    for source in Path(siesta_contract.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{source.name} imports {name}"
