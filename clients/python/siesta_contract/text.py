"""Rules on text that the schema states and the service enforces.

Each rule is one pattern, used twice: in the JSON Schema (``pattern``) and by the
code that checks the value and answers with its own error code. The patterns mean
the same under JSON Schema's (ECMA) regular expressions and Python's: whitespace is
spelled out so that both agree on what is blank.
"""

from __future__ import annotations

import re

ID_PATTERN = r"^[A-Za-z0-9._:-]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*$"
"""Ids of orgs, users and conversations: ``A-Z a-z 0-9 . _ : -``, not only dots
(``.`` and ``..`` would mean something else in any path they reach)."""
ID_MAX_CHARS = 128

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


WORKSPACE = "/mnt/work"
_ANY = r"[^\u0000]*"
# The first name that is neither "." nor "": not "..", so that the path does not
# begin by climbing out. It may start with a blank (a name " a" is a name).
_NAME = r"(?:[^./\u0000]|\.[^./\u0000]|\.\.[^/\u0000])"
_NAME_NOT_BLANK = rf"(?:[^./{_BLANK}\u0000]|\.[^./\u0000]|\.\.[^/\u0000])"
_UNDER = rf"{WORKSPACE}(?:/+\.)*/+{_NAME}{_ANY}"
_RELATIVE = (
    rf"(?:\./+)*{_NAME_NOT_BLANK}{_ANY}"
    rf"|(?:\./+)+[{_BLANK}]{_ANY}"
    rf"|[{_BLANK}]{_ANY}[^{_BLANK}\u0000]{_ANY}"
)
_ITSELF = rf"{WORKSPACE}(?:/+\.)*/*|\.(?:/+\.)*/*"
WORKSPACE_FILE_PATH = rf"^(?:{_UNDER}|{_RELATIVE})$"
"""A path to something in the workspace: relative to /mnt/work, or absolute under
it; not blank, no NUL; not beginning with ``..``; not the workspace itself (``.``,
``/mnt/work/``, ...). Whether a ``..`` further on climbs out (``a/../..``), and where
symlinks lead, no regular expression can say: the service checks those itself."""
WORKSPACE_PATH = rf"^(?:{_UNDER}|{_RELATIVE}|{_ITSELF})$"
"""``WORKSPACE_FILE_PATH``, or the workspace itself (a folder to list)."""

_LABEL = r"[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?"
# The last label has a letter: no address (10.0.0.1) is ever a name here.
_TOP = r"([A-Za-z0-9_][A-Za-z0-9_-]*)?[A-Za-z_]([A-Za-z0-9_-]*[A-Za-z0-9_])?"
_PORT = r"([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
EGRESS_ENTRY = rf"(\*\.({_LABEL}\.)+|({_LABEL}\.)*){_TOP}(:{_PORT})?"
"""One egress allowlist entry: ``name``, ``*.suffix`` (two labels at least), ``:port``."""
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(\.{_OCTET}){{3}}"
_H = r"[0-9A-Fa-f]{1,4}"
_IPV6 = (
    rf"(({_H}:){{7}}{_H}|({_H}:){{1,7}}:|({_H}:){{1,6}}:{_H}|({_H}:){{1,5}}(:{_H}){{1,2}}"
    rf"|({_H}:){{1,4}}(:{_H}){{1,3}}|({_H}:){{1,3}}(:{_H}){{1,4}}|({_H}:){{1,2}}(:{_H}){{1,5}}"
    rf"|{_H}:(:{_H}){{1,6}}|:((:{_H}){{1,7}}|:)|({_H}:){{1,4}}:{_IPV4}|::([Ff]{{4}}:)?{_IPV4})"
)
_V4_PREFIX = r"(/(3[0-2]|[12]?[0-9]))?"
_V6_PREFIX = r"(/(12[0-8]|1[01][0-9]|[1-9]?[0-9]))?"
ADDRESS_ENTRY = (
    rf"({_IPV4}{_V4_PREFIX}(:{_PORT})?|{_IPV6}{_V6_PREFIX}|\[{_IPV6}{_V6_PREFIX}\](:{_PORT})?)"
)
"""An address or a CIDR range (``1.1.1.1``, ``8.8.8.0/24``, ``2001:db8::/32``), with
one ``:port`` (an IPv6 one in brackets: ``[2001:db8::/32]:8443``)."""
NETWORK_ENTRY = rf"({EGRESS_ENTRY}|{ADDRESS_ENTRY})"
"""An egress entry or an address entry: what the deployment's allowlist and a
sandbox's network rules take (an agent's list and a secret's hosts are names)."""
EGRESS_HEADER = rf"^\s*({EGRESS_ENTRY}(\s*,\s*{EGRESS_ENTRY})*)?\s*$"
"""Entries separated by commas, as the ``X-Siesta-Egress-Allow`` header carries them."""

IDEMPOTENCY_KEY_MAX_CHARS = 255
IDEMPOTENCY_KEY = rf"^[\x21-\x7e]{{1,{IDEMPOTENCY_KEY_MAX_CHARS}}}$"
"""An ``Idempotency-Key``: 1 to 255 visible ASCII characters."""
