"""One contract per agent function: an arguments model, a result model (both in
``siesta_contract.functions``), and the JSON Schema the catalog publishes, generated
from the arguments model.

Every way into a function — the direct HTTP routes, ``/v1/tools/execute``, the
JavaScript helpers — validates with the same model, so what the catalog tells a
model and what the service accepts cannot drift apart.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from siesta_contract.base import Arguments, allows_null, optional_properties_allow_null

from runtime.core.errors import InvalidArguments

_Model = TypeVar("_Model", bound=BaseModel)


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    description: str
    arguments: type[Arguments]
    result: type[BaseModel] | None = None
    """``None`` where the result is the upstream's own (forwarded as it is)."""

    def parameters(self) -> dict[str, Any]:
        """The arguments' JSON Schema as function-calling APIs take it."""
        return tool_schema(self.arguments)

    def parse(self, arguments: dict[str, Any]) -> Any:
        return parse_arguments(self.arguments, self.name, arguments)


def parse_arguments(model: type[_Model], function: str, arguments: dict[str, Any]) -> _Model:
    """Validate a tool call's arguments; a bad one is ``invalid_arguments``."""
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        msg = f"{function}: bad arguments: {problems}"
        raise InvalidArguments(msg) from exc


def tool_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model_json_schema`` without titles and with ``$defs`` inlined: the plain
    object schema that function-calling models read best."""
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})
    cleaned: dict[str, Any] = _clean(schema, definitions)
    cleaned.setdefault("required", [])  # function-calling APIs expect the list
    return cleaned


def _clean(node: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_clean(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[-1]]
        return _clean({**target, **{k: v for k, v in node.items() if k != "$ref"}}, definitions)
    return {
        key: (
            _clean_properties(value, definitions)
            if key == "properties"
            else _clean(value, definitions)
        )
        for key, value in node.items()
        if key != "title"
    }


def _clean_properties(properties: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    # Inside "properties" the keys are field names (a field may be called "title").
    return {name: _clean(value, definitions) for name, value in properties.items()}


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` in the strict form of function calling (OpenAI ``strict: true``):
    every object lists all its properties as required, the optional ones allowing
    ``null`` (which the service reads as "not given"), and takes no others.

    An object that declares no properties (any keys at all) has no strict form; it
    is left as it is, and a strict model provider will refuse that function."""
    strict: dict[str, Any] = _strict(copy.deepcopy(schema))
    return strict


_VALUES = ("default", "examples", "enum", "const")
"""Keywords whose value is data, not a schema: never rewritten."""


def _strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    result = {
        key: (
            value
            if key in _VALUES
            else {name: _strict(prop) for name, prop in value.items()}
            if key == "properties" and isinstance(value, dict)
            else _strict(value)
        )
        for key, value in node.items()
    }
    properties = result.get("properties")
    if isinstance(properties, dict) and properties:
        optional_properties_allow_null(result)
        result["required"] = list(properties)
        result["additionalProperties"] = False
    return result


def without_null_optionals(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A connection function's call read as the service reads its own: ``null`` for an
    optional property its schema declares is "not given" (left out), unless the
    property's schema takes ``null`` as a value of its own."""
    properties: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    return {
        name: value
        for name, value in arguments.items()
        if value is not None
        or name not in properties
        or name in required
        or allows_null(properties[name])
    }
