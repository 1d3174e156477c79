"""``/v1/secrets`` on a deployment without ``SIESTA_EGRESS__SECRETS_KEY``: refused, saying
what to set (apart from test_secrets.py: one in-process service per module)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import headers
from tests.inprocess import in_process_service


def test_without_a_key_the_routes_say_what_to_set(tmp_path: Path) -> None:
    with in_process_service(tmp_path, {"SIESTA_PROVIDER__TYPE": "fake"}) as running:
        refused = running.client.put(
            "/v1/secrets/x", headers=headers(), json={"value": "v", "hosts": ["a.example"]}
        )
    assert (refused.status_code, refused.json()["error"]["code"]) == (
        409,
        "secrets_not_configured",
    )
    assert "SIESTA_EGRESS__SECRETS_KEY" in refused.text
