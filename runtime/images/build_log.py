"""A build's log as the store keeps it: bounded in bytes, and with the service's
secrets masked.

A build's steps are the operator's, but what they print reaches everyone who can
read the catalog's builds (the console, ``/v1/admin/image-builds``) and the store:
a step that prints its environment, a file or an error page must not show a token
of the deployment's. The cap is in bytes, not lines alone, since one line can be
megabytes (a step that prints a binary).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

MASK = "\u2022" * 6
MIN_SECRET_CHARS = 6
"""Shorter values are not masked: they would mask ordinary words everywhere."""
LAST_LINE_BYTES = 4096
"""The closing line (the build's error) is kept past the cap, cut to this."""


class BuildLog:
    def __init__(
        self, append: Callable[[str], object], limit_bytes: int, secrets: Iterable[str] = ()
    ) -> None:
        self._append = append
        self._limit = limit_bytes
        # Longest first: a secret that contains another is masked whole.
        self._secrets = sorted(
            {s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True
        )
        self._written = 0
        self._cut = False

    def masked(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return text

    def line(self, text: str) -> None:
        """One line of progress; past the cap, one note says so and the rest is dropped."""
        if self._cut:
            return
        text = self.masked(text)
        size = len(text.encode()) + 1
        if self._written + size > self._limit:
            self._cut = True
            self._append(
                f"[the log stops here: it is capped at {self._limit} bytes "
                "(SIESTA_IMAGES__BUILD_LOG_BYTES); the build goes on]"
            )
            return
        self._written += size
        self._append(text)

    def last(self, text: str) -> None:
        """The closing line, kept whatever the cap (cut to ``LAST_LINE_BYTES``)."""
        self._append(cut(self.masked(text), LAST_LINE_BYTES))


def cut(text: str, limit_bytes: int) -> str:
    data = text.encode()
    if len(data) <= limit_bytes:
        return text
    return data[:limit_bytes].decode(errors="ignore") + " [cut]"
