"""One CPython 3.11 defect the test process works around, and why.

``ast.parse`` keeps its recursion counter in state shared by every thread
(python/cpython#106905; fixed in 3.13 by a counter per call). When two threads
parse at once, one raises ``SystemError: AST constructor recursion depth
mismatch``. Both pytest (showing the source of a failed assertion) and Python
3.11's ``traceback`` (the ``^^^^`` under the failing expression) call
``ast.parse``, so a test failing while a service thread logs a traceback made
pytest itself crash (INTERNALERROR) and hide which test had failed. Parsing
under one lock removes the race; ``ast.parse`` is looked up on the module at
each call, so every caller goes through it.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_PARSE_LOCK = threading.RLock()  # re-entrant: a finalizer run mid-parse may parse too
_parse = ast.parse


def _parse_alone(*args: Any, **kwargs: Any) -> Any:
    with _PARSE_LOCK:
        return _parse(*args, **kwargs)


def serialise_ast_parse() -> None:
    if ast.parse is not _parse_alone:
        ast.parse = _parse_alone
