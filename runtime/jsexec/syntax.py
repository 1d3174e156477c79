"""Find ``async`` functions and ``for await`` in a script, the way the parser sees them.

V8 itself refuses ``await`` outside an async function (a syntax error the worker
reports as ``js_async_not_supported``), and the worker checks whether the final
value is a Promise. What neither shows is an ``async`` function whose promise
the script drops or stores, so this module tokenizes the source: strings,
template literals, comments and regular expressions are skipped, and ``async``
counts only where the grammar makes it a modifier (``async function``,
``async x =>``, ``async (…) =>``, ``async name() {}`` in a class or object),
never as a name (``var async``, ``obj.async()``, ``{async: 1}``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SPACE = re.compile(r"[ \t\f\v\u00a0\ufeff\u2000-\u200a\u202f\u205f\u3000]+")
_NEWLINE = re.compile(r"\r\n|[\n\r\u2028\u2029]")
_NAME = re.compile(r"(?:[$_\w]|\\u[0-9a-fA-F]{4}|\\u\{[0-9a-fA-F]+\})+")
_NUMBER = re.compile(r"\.?\d[\w.]*(?:[eE][+-]\d+)?")
_PUNCTUATOR = re.compile(r"=>|\?\.(?!\d)|\.\.\.|[^\s\w$]")
_REGEX_BODY = re.compile(r"(?:\\.|\[(?:\\.|[^\]\\\n])*\]|[^/\\\[\n])+/[\w$]*")
_STRING = {
    "'": re.compile(r"'(?:\\[\s\S]|[^'\\\n])*'?"),
    '"': re.compile(r'"(?:\\[\s\S]|[^"\\\n])*"?'),
}
_TEMPLATE_TEXT = re.compile(r"(?:\\[\s\S]|\$(?!\{)|[^`\\$])*")

_BEFORE_REGEX_WORDS = frozenset(
    {"return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw"}
    | {"case", "do", "else", "yield", "await"}
)
_NOT_A_NAME = frozenset({"in", "of", "instanceof"})


@dataclass(frozen=True)
class Token:
    kind: str
    """``name``, ``punct`` or ``literal`` (number, string, template, regex)."""
    text: str
    line: int
    column: int
    newline_before: bool


def find_async(source: str) -> tuple[int, int] | None:
    """Line and column (1-based) of the first async function or ``for await``."""
    if "async" not in source and "await" not in source:
        return None  # most scripts: no need to tokenize (about 2.5 µs a byte)
    tokens = _tokens(source)
    for index, token in enumerate(tokens):
        if token.kind != "name" or (index and tokens[index - 1].text in (".", "?.")):
            continue
        if token.text == "async" and _is_async_modifier(tokens, index):
            return token.line, token.column
        if token.text == "await" and index and tokens[index - 1].text == "for":
            return token.line, token.column
    return None


def _is_async_modifier(tokens: list[Token], index: int) -> bool:
    following = tokens[index + 1 : index + 3]
    if not following or following[0].newline_before:
        return False
    first = following[0]
    second = following[1].text if len(following) > 1 else ""
    if first.text == "function":
        return True
    if first.kind == "name" and first.text not in _NOT_A_NAME:
        return second in ("=>", "(")  # async x => …, async method() {…}
    if first.text == "*":  # async *generator() {…}
        return len(following) > 1 and following[1].kind == "name"
    if first.text == "(":
        closing = _matching(tokens, index + 1)
        return (
            closing is not None
            and tokens[closing + 1 : closing + 2] != []
            and (tokens[closing + 1].text == "=>")
        )
    return False


def _matching(tokens: list[Token], opening: int) -> int | None:
    depth = 0
    for index in range(opening, len(tokens)):
        text = tokens[index].text
        if tokens[index].kind != "punct":
            continue
        if text in "([{":
            depth += 1
        elif text in ")]}":
            depth -= 1
            if depth == 0:
                return index
    return None


def _tokens(source: str) -> list[Token]:
    return _Lexer(source).run()


class _Lexer:
    def __init__(self, source: str) -> None:
        self.source = source
        self.position = 0
        self.line = 1
        self.line_start = 0
        self.newline = False
        self.tokens: list[Token] = []
        self.braces: list[int] = []
        """Open ``{`` counts per enclosing template ``${``: a ``}`` at zero resumes it."""

    def run(self) -> list[Token]:
        while self.position < len(self.source):
            self._step()
        return self.tokens

    def _step(self) -> None:
        source, at = self.source, self.position
        char = source[at]
        if space := _SPACE.match(source, at):
            self.position = space.end()
        elif newline := _NEWLINE.match(source, at):
            self._skip_line(newline.end())
        elif source.startswith("//", at) or self._html_comment():
            line_end = _NEWLINE.search(source, at)
            self.position = line_end.start() if line_end else len(source)
        elif source.startswith("/*", at):
            close = source.find("*/", at + 2)
            self._advance_over(close + 2 if close >= 0 else len(source))
        elif char in _STRING:
            self._literal(_STRING[char].match(source, at))
        elif char == "`":
            self.position += 1
            self._template_text()
        elif char == "/" and self._regex_allowed() and (regex := _REGEX_BODY.match(source, at + 1)):
            self._add("literal", regex.end())
        elif number := _NUMBER.match(source, at):
            self._add("literal", number.end())
        elif name := _NAME.match(source, at):
            self._add("name", name.end())
        else:
            self._punctuator()

    def _punctuator(self) -> None:
        match = _PUNCTUATOR.match(self.source, self.position)
        end = match.end() if match else self.position + 1
        text = self.source[self.position : end]
        if text == "{" and self.braces:
            self.braces[-1] += 1
        elif text == "}" and self.braces:
            if self.braces[-1] == 0:
                self.braces.pop()
                self._add("literal", end)
                self._template_text()
                return
            self.braces[-1] -= 1
        self._add("punct", end)

    def _template_text(self) -> None:
        """From inside a template literal up to its end or its next ``${``."""
        match = _TEMPLATE_TEXT.match(self.source, self.position)
        end = match.end() if match else self.position
        if self.source.startswith("${", end):
            self.braces.append(0)
            end += 2
        elif end < len(self.source):
            end += 1  # the closing backquote
        self._add_over("literal", end)

    def _regex_allowed(self) -> bool:
        if not self.tokens:
            return True
        last = self.tokens[-1]
        if last.kind == "name":
            return last.text in _BEFORE_REGEX_WORDS
        if last.kind == "literal":
            return False
        return last.text not in (")", "]", "}")

    def _html_comment(self) -> bool:
        return self.source.startswith("<!--", self.position) or (
            self.source.startswith("-->", self.position) and (self.newline or not self.tokens)
        )

    def _literal(self, match: re.Match[str] | None) -> None:
        self._add_over("literal", match.end() if match else len(self.source))

    def _add(self, kind: str, end: int) -> None:
        column = self.position - self.line_start + 1
        text = self.source[self.position : end]
        self.tokens.append(Token(kind, text, self.line, column, self.newline))
        self.newline = False
        self.position = end

    def _add_over(self, kind: str, end: int) -> None:
        """A token that may span lines (strings with line continuations, templates)."""
        line, column = self.line, self.position - self.line_start + 1
        text = self.source[self.position : end]
        self.tokens.append(Token(kind, text, line, column, self.newline))
        self._advance_over(end)
        self.newline = False

    def _advance_over(self, end: int) -> None:
        for match in _NEWLINE.finditer(self.source, self.position, end):
            self.line += 1
            self.line_start = match.end()
            self.newline = True
        self.position = end

    def _skip_line(self, end: int) -> None:
        self.line += 1
        self.line_start = self.position = end
        self.newline = True
