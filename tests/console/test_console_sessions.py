"""A console session lives in the store: another instance on the same store knows it,
and it ends once its token leaves the configuration. (Its own module: the app in this
process runs one instance at a time.)"""

from __future__ import annotations

from pathlib import Path

from tests.console.helpers import CONSOLE_TOKENS, browser, sign_in
from tests.inprocess import in_process_service


def test_a_session_outlives_its_instance_but_not_its_tokens_removal(
    tmp_path: Path,
) -> None:
    """Another instance on the same store knows the session; once the token is out of
    the configuration, the session is over."""
    env = {"SIESTA_PROVIDER__TYPE": "fake", "SIESTA_TOKENS": CONSOLE_TOKENS}
    with in_process_service(tmp_path, env) as first:
        client = browser(first)
        sign_in(client)
        cookie = client.cookies["siesta_console"]
    with in_process_service(tmp_path, env) as second:
        again = browser(second)
        again.cookies.set("siesta_console", cookie, path="/console")
        assert again.get("/console", follow_redirects=False).status_code == 200
    without = {**env, "SIESTA_TOKENS": "[]"}
    with in_process_service(tmp_path, without) as third:
        gone = browser(third)
        gone.cookies.set("siesta_console", cookie, path="/console")
        assert gone.get("/console", follow_redirects=False).status_code == 303
