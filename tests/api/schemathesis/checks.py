"""A schemathesis check of our own, loaded with ``SCHEMATHESIS_HOOKS``.

The built-in ``positive_data_acceptance`` is told (``schemathesis.toml``) to let
a schema-valid request be refused with 413 or 422, because some refusals depend
on what no schema can know: the image catalog, the conversation's files, where a
path leads inside the workspace, limits in bytes that are settings. This check
takes the place of the leeway: such a refusal must carry one of those codes.
Anything else (say ``invalid_request`` for a value the schema allows) fails.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis

SEMANTIC_REFUSALS = {
    "image_required": "the base-image header is needed when a conversation's sandbox is made",
    "image_not_in_catalog": "the catalog's enabled images",
    "missing_input": "the conversation's files",
    "path_outside_workspace": "where a path leads after normalising and symlinks",
    "not_a_file": "what is at a path",
    "not_a_directory": "what is at a path",
    "transfer_too_large": "limits in bytes set by the deployment",
    "command_too_large": "a limit in UTF-8 bytes set by the deployment",
    "code_too_large": "a limit in UTF-8 bytes set by the deployment",
    "request_too_large": "a limit in bytes set by the deployment",
    "idempotency_key_reused": "the keys earlier requests came with (fuzzed keys repeat)",
}
"""Codes a schema-valid request may be refused with, and what they depend on."""


@schemathesis.check
def valid_data_is_refused_only_for_semantic_reasons(
    ctx: Any, response: Any, case: Any
) -> bool | None:
    meta = getattr(case, "meta", None)
    if meta is None or not meta.generation.mode.is_positive:
        return None
    if response.status_code not in (413, 422):
        return None
    code = _error_code(response.text)
    if code in SEMANTIC_REFUSALS or (code == "invalid_path" and _is_length_limit(response.text)):
        return None
    msg = (
        f"schema-valid request refused with {response.status_code} {code!r}: {response.text[:300]}"
    )
    raise AssertionError(msg)


def _error_code(text: str) -> str | None:
    try:
        return str(json.loads(text)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return None


def _is_length_limit(text: str) -> bool:
    """A path over a byte limit (of the path, or of one name) or naming the workspace
    itself: the schema counts characters and cannot see normalisation."""
    error = json.loads(text)["error"]
    return "limit" in error or "workspace itself" in str(error.get("message"))
