"""The base of the agent functions' models: exactly the documented fields.

**Null means "not given"** for every optional argument. Models calling functions in
strict mode (OpenAI's ``strict: true``, and others that require every property) send
every property, ``null`` for each optional one they leave out; an optional argument
sent as ``null`` takes its default, so such a call means what the same call without
the property means. The published schemas say so: each optional property also
allows ``null``. A required argument stays required: ``null`` for it is refused.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

ANNOTATIONS = ("title", "description", "default", "examples", "deprecated")
"""Keywords that describe a property rather than constrain it: they stay outside the
``anyOf`` that makes it nullable."""


def optional_properties_allow_null(schema: dict[str, Any]) -> None:
    """Every property not in ``required`` also allows ``null`` (in place)."""
    required = set(schema.get("required", []))
    properties: dict[str, Any] = schema.get("properties", {})
    for name, prop in properties.items():
        if name not in required and not allows_null(prop):
            properties[name] = nullable(prop)


def allows_null(prop: dict[str, Any]) -> bool:
    kind = prop.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(allows_null(option) for option in prop.get("anyOf", []) + prop.get("oneOf", []))


def nullable(prop: dict[str, Any]) -> dict[str, Any]:
    """``prop`` or ``null``, its annotations kept where readers look for them."""
    outer = {key: value for key, value in prop.items() if key in ANNOTATIONS}
    inner = {key: value for key, value in prop.items() if key not in ANNOTATIONS}
    return {"anyOf": [inner, {"type": "null"}], **outer}


def not_nullable(prop: dict[str, Any]) -> dict[str, Any]:
    """``nullable``'s inverse: ``prop`` without its ``null`` option and its default."""
    options = [o for o in prop.get("anyOf", []) if o.get("type") != "null"]
    outer = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
    return {**options[0], **outer} if len(options) == 1 else outer | {"anyOf": options}


def _schema_extra(schema: dict[str, Any], model: type[BaseModel]) -> None:
    optional_properties_allow_null(schema)


class Arguments(BaseModel):
    """Function arguments: exactly the documented fields, nothing else; ``null`` for
    an optional one is the same as leaving it out."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_schema_extra)

    @model_validator(mode="before")
    @classmethod
    def _null_is_not_given(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        optional = {name for name, field in cls.model_fields.items() if not field.is_required()}
        return {
            key: value for key, value in data.items() if value is not None or key not in optional
        }


class Result(BaseModel):
    """A function's result, in the wire shape (camelCase) the model reads."""

    model_config = ConfigDict(extra="forbid")
