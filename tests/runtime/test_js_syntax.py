"""Where a script uses async functions: tokens, not text (strings, comments,
templates and regular expressions never count)."""

from __future__ import annotations

import pytest

from runtime.jsexec.syntax import find_async


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("async function f() { return 1 } f()", (1, 1)),
        ("var f = async () => 1;", (1, 9)),
        ("var f = async x => x;", (1, 9)),
        ("var f = async (a, [b, c], {d}) => a;", (1, 9)),
        ("({async m() { return 1 }}).m()", (1, 3)),
        ("class A {\n  async *g() {} }", (2, 3)),
        ("for await (const x of y) {}", (1, 5)),
        ("x = `a ${ async () => 1 } b`", (1, 11)),
        ("/* a\n comment */ var s = 'x';\n  async function g() {}", (3, 3)),
        # Not async functions:
        ("var s = 'async function f() {}'; s", None),
        ('var s = "await \\" async function"; s', None),
        ("// async function f() {}\n1", None),
        ("/* async () => 1 */ 2", None),
        ("var async = 1; async + 1", None),
        ("var o = {async: 1}; o.async", None),
        ("obj.async(1); obj?.async(2)", None),
        ("async(1, 2)", None),
        ("async (1, 2); x => x", None),
        ("var await = 3; await", None),
        ("`async function ${1 + {a: 1}.a} x`", None),
        ("`${`async function`}`", None),
        ("/async function/.test(s)", None),
        ("var x = a / async / 2", None),
        ("async\nfunction f() {}", None),  # no line break allowed after async
        ("return_value = 'no keyword at all'", None),
    ],
)
def test_async_functions_are_found_only_in_code(source: str, where: tuple[int, int] | None) -> None:
    assert find_async(source) == where
