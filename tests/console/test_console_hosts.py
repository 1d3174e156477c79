"""The console on a host name of its own (``SIESTA_CONSOLE__HOST``), and never on a
preview's: over HTTP without a browser (the app in this process, fake provider)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from api.console.hosts import is_preview_host
from runtime.settings import Settings
from tests.console.helpers import ADMIN_TOKEN, CONSOLE_TOKENS, browser
from tests.inprocess import InProcessService, in_process_service

CONSOLE = "console.example.test"
PREVIEWS = "previews.example.test"
E2B = "e2b.example.test"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    env = {
        "SIESTA_PROVIDER__TYPE": "fake",
        "SIESTA_TOKENS": CONSOLE_TOKENS,
        "SIESTA_CONSOLE__HOST": CONSOLE,
        "SIESTA_PORTS__PREVIEW_DOMAIN": PREVIEWS,
        # E2B's host form off: its sandbox names reach the routes, so the console's own
        # refusal is what answers them.
        "SIESTA_E2B__ENABLED": "false",
        "SIESTA_E2B__PORTS_DOMAIN": E2B,
    }
    with in_process_service(tmp_path_factory.mktemp("siesta-data"), env) as running:
        yield running


def test_the_console_answers_on_its_own_host(service: InProcessService) -> None:
    client = browser(service, f"http://{CONSOLE}:8080")
    signed_in = client.post("/console/sign-in", data={"token": ADMIN_TOKEN})
    assert signed_in.status_code == 200 and signed_in.url.path == "/console"


@pytest.mark.parametrize("host", ["testserver", "api.example.test", "console.example.test.evil"])
def test_elsewhere_it_is_421_and_signs_nobody_in(service: InProcessService, host: str) -> None:
    client = browser(service, f"http://{host}")
    for refused in (
        client.get("/console", follow_redirects=False),
        client.get("/console/sign-in"),
        client.post("/console/sign-in", data={"token": ADMIN_TOKEN}, follow_redirects=False),
    ):
        assert refused.status_code == 421
        assert refused.headers["x-siesta-error"] == "console_wrong_host"
        assert "set-cookie" not in refused.headers and 'name="csrf"' not in refused.text
    # The API is not the console's: it still answers there.
    assert client.get("/healthz").status_code == 200


def test_an_e2b_sandbox_host_is_refused_whatever_the_console_host(
    service: InProcessService,
) -> None:
    client = browser(service, f"http://8000-isb123.{E2B}")
    refused = client.post("/console/sign-in", data={"token": ADMIN_TOKEN}, follow_redirects=False)
    assert refused.status_code == 403
    assert refused.headers["x-siesta-error"] == "console_on_preview_host"


@pytest.mark.parametrize(
    ("host", "code"),
    [
        (f"console.{PREVIEWS}", "preview_host_unknown"),
        (f"8000-{'a' * 24}.{PREVIEWS}", "unauthorized"),
    ],
)
def test_a_preview_domain_host_never_reaches_the_console(
    service: InProcessService, host: str, code: str
) -> None:
    # The host form answers first: no token, or no preview of that name.
    refused = browser(service, f"http://{host}").get("/console/sign-in")
    assert refused.status_code in (401, 404)
    assert refused.json()["error"]["code"] == code


def test_without_a_console_host_a_preview_host_is_still_one() -> None:
    settings = Settings(
        api_token="x" * 32, e2b={"ports_domain": E2B}, ports={"preview_domain": PREVIEWS}
    )
    assert settings.console.host is None
    for host in (f"49983-isb123.{E2B}", f"x.{PREVIEWS}", PREVIEWS):
        assert is_preview_host(host, settings)
    for host in (f"api.{E2B}", E2B, "console.example.test"):
        assert not is_preview_host(host, settings)


@pytest.mark.parametrize("console", [PREVIEWS, f"console.{PREVIEWS}"])
def test_the_console_host_may_not_be_under_the_preview_domain(console: str) -> None:
    with pytest.raises(ValidationError, match="must not be the preview domain"):
        Settings(
            api_token="x" * 32,
            console={"host": console},
            ports={"preview_domain": PREVIEWS},
        )


def test_the_preview_domain_is_not_e2bs() -> None:
    with pytest.raises(ValidationError, match="must differ from SIESTA_E2B__PORTS_DOMAIN"):
        Settings(api_token="x" * 32, e2b={"ports_domain": E2B}, ports={"preview_domain": E2B})
