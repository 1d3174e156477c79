"""Settings: each backend chosen by a tagged model, and incomplete ones named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from runtime.agents.settings import HttpGatewaySettings, NoGatewaySettings, OpenAIGatewaySettings
from runtime.seams.provider_settings import FakeProviderSettings
from runtime.seams.store_settings import RedisStoreSettings, SqliteStoreSettings
from runtime.settings import Settings, describe_invalid_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("SIESTA_")]:
        monkeypatch.delenv(name)


def settings_from(monkeypatch: pytest.MonkeyPatch, **env: str) -> Settings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()


def problems(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    with pytest.raises(ValidationError) as caught:
        settings_from(monkeypatch, **env)
    return describe_invalid_settings(caught.value)


def test_defaults_are_sqlite_docker_and_no_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_from(monkeypatch, SIESTA_DATA_DIR="/data")
    assert isinstance(settings.store, SqliteStoreSettings)
    assert settings.sqlite_path == Path("/data/siesta.db")
    assert settings.provider.type == "docker"
    assert isinstance(settings.agents.gateway, NoGatewaySettings)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"SIESTA_STORE__URL": "redis://r:6379/1"}, RedisStoreSettings(url="redis://r:6379/1")),
        (
            {"SIESTA_STORE__TYPE": "redis", "SIESTA_STORE__URL": "rediss://r/0"},
            RedisStoreSettings(url="rediss://r/0"),
        ),
        ({"SIESTA_STORE__URL": "sqlite:///x/s.db"}, SqliteStoreSettings(path=Path("/x/s.db"))),
        (
            {"SIESTA_STORE__TYPE": "sqlite", "SIESTA_STORE__PATH": "/y.db"},
            SqliteStoreSettings(path=Path("/y.db")),
        ),
    ],
)
def test_the_store_is_one_tagged_model_in_either_form(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: object
) -> None:
    assert settings_from(monkeypatch, **env).store == expected


def test_the_gateway_in_the_nested_and_the_short_form(monkeypatch: pytest.MonkeyPatch) -> None:
    nested = settings_from(
        monkeypatch,
        SIESTA_AGENTS__GATEWAY__TYPE="http",
        SIESTA_AGENTS__GATEWAY__BACKEND_URL="http://backend/agents",
    )
    assert nested.agents.gateway == HttpGatewaySettings(backend_url="http://backend/agents")
    monkeypatch.delenv("SIESTA_AGENTS__GATEWAY__TYPE")
    monkeypatch.delenv("SIESTA_AGENTS__GATEWAY__BACKEND_URL")
    short = settings_from(
        monkeypatch,
        SIESTA_AGENTS__GATEWAY="http",
        SIESTA_AGENTS__BACKEND_URL="http://backend/agents",
        SIESTA_AGENTS__MAX_PARALLEL="3",
    )
    assert short.agents.gateway == nested.agents.gateway
    assert short.agents.max_parallel == 3


def test_the_openai_gateway_takes_its_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    agents = '[{"name": "a", "model": "m", "base_url": "http://llm/v1"}]'
    settings = settings_from(
        monkeypatch, SIESTA_AGENTS__GATEWAY__TYPE="openai", SIESTA_AGENTS__GATEWAY__AGENTS=agents
    )
    assert isinstance(settings.agents.gateway, OpenAIGatewaySettings)
    assert settings.agents.gateway.agents[0].name == "a"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"SIESTA_AGENTS__GATEWAY": "http"}, "SIESTA_AGENTS__GATEWAY__BACKEND_URL: Field required"),
        (
            {"SIESTA_AGENTS__GATEWAY__TYPE": "openai"},
            "SIESTA_AGENTS__GATEWAY__AGENTS: Field required",
        ),
        ({"SIESTA_STORE__TYPE": "redis"}, "SIESTA_STORE__URL: Field required"),
        ({"SIESTA_STORE__URL": "mysql://db"}, "scheme 'mysql' is not supported"),
        ({"SIESTA_PROVIDER__TYPE": "podman"}, "SIESTA_PROVIDER"),
        (
            {"SIESTA_PROVIDER__TYPE": "fake", "SIESTA_PROVIDER__BASE_URL": "x"},
            "SIESTA_PROVIDER__BASE_URL",
        ),
        ({"SIESTA_DEPLOYMENT_ID": "Not A Label"}, "SIESTA_DEPLOYMENT_ID"),
    ],
)
def test_an_incomplete_or_unknown_backend_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], named: str
) -> None:
    assert named in problems(monkeypatch, **env)


def test_the_fake_provider_is_its_own_model(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (
        settings_from(monkeypatch, SIESTA_PROVIDER__TYPE="fake").provider == FakeProviderSettings()
    )


def test_proxy_credentials_outlive_the_longest_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials older than the revocation retention are refused: a command's must
    not expire while it may still run."""
    said = problems(
        monkeypatch,
        SIESTA_COMMAND__MAX_TIMEOUT_SECONDS="7200",
        SIESTA_EGRESS__REVOCATION_RETENTION_SECONDS="3600",
    )
    assert "SIESTA_EGRESS__REVOCATION_RETENTION_SECONDS must be longer" in said


@pytest.mark.parametrize(
    ("env", "url"),
    [
        ({"SIESTA_DATA_DIR": "/data"}, "sqlite:///data/siesta.db"),
        ({"SIESTA_STORE__URL": "redis://:pw@r:6379/1"}, "redis://:pw@r:6379/1"),
    ],
)
def test_the_egress_proxy_reads_the_services_own_store(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str
) -> None:
    from runtime.wiring import egress_setup

    assert egress_setup(settings_from(monkeypatch, **env)).store_url == url
