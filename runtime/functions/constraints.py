"""Rules on argument text that the schema states and the runtime enforces.

Each rule is one pattern, used twice: in the JSON Schema (``pattern``) and by the
code that checks the value and answers with the function's own error code. The
patterns mean the same under JSON Schema's (ECMA) regular expressions and
Python's: whitespace is spelled out so that both agree on what is blank.
"""

from __future__ import annotations

import re

# Python's str.isspace() and ECMA's \s differ at the edges; the union of both.
_BLANK = r"\s\u001c-\u001f\u0085\ufeff"
NON_BLANK_TEXT = rf"^[^\u0000]*[^{_BLANK}\u0000][^\u0000]*$"
"""At least one character that is not whitespace, and no NUL anywhere."""

_NON_BLANK = re.compile(NON_BLANK_TEXT)


def is_non_blank_text(value: str) -> bool:
    return _NON_BLANK.fullmatch(value) is not None


_FOLDER_OR_CONTROL = r"/\\\u0000-\u001f"
FILE_NAME = rf"^[^{_FOLDER_OR_CONTROL}]*[^{_FOLDER_OR_CONTROL}{_BLANK}.][^{_FOLDER_OR_CONTROL}]*$"
"""A conversation file's display name: no folders (/ or \\), no control characters,
and at least one character that is neither whitespace nor a dot (so never . or ..)."""
MAX_FILE_NAME_CHARS = 255

_FILE_NAME = re.compile(FILE_NAME)


def is_file_name(value: str) -> bool:
    return len(value) <= MAX_FILE_NAME_CHARS and _FILE_NAME.fullmatch(value) is not None
