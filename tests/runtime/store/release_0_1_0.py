"""What the frozen 0.1.0 stores (``tests/fixtures/store_v0*``) hold, read back through
today's store protocols: every record as it was written."""

from __future__ import annotations

from runtime.core.operator_records import AuditEntry, AuditFilter
from runtime.core.records import AgentRecord, FileKind, FileRecord, SessionRecord, SessionStatus
from runtime.seams.stores import Stores
from tests.helpers import REPO

FIXTURES = REPO / "tests" / "fixtures"

SESSION = SessionRecord(
    org="org-a",
    conversation="conv-1",
    session_id="s1",
    sandbox_id="siesta-s1",
    image_id="debian-base",
    image_ref="debian-base:1",
    status=SessionStatus.ACTIVE,
    created_at=1000.5,
    last_used_at=1010.25,
    generation=2,
    user="alice",
    fence=7,
)
ATTACHMENT = FileRecord(
    org="org-a",
    conversation="conv-1",
    file_id="f1",
    name="data.csv",
    size=3,
    content_type="text/csv",
    sha256="ab" * 32,
    kind=FileKind.ATTACHMENT,
    created_at=1001.0,
)
ARTIFACT = FileRecord(
    org="org-a",
    conversation="conv-1",
    file_id="f2",
    name="out.png",
    size=10,
    content_type="image/png",
    sha256="cd" * 32,
    kind=FileKind.ARTIFACT,
    created_at=1002.0,
    message_id="m1",
)
AGENT = AgentRecord(
    org="org-a",
    agent_id="writer",
    config={"id": "writer"},
    updated_at=1003.0,
    updated_by="backend",
)
AUDIT = AuditEntry(
    "e1", 1004.0, "ops", "image.enable", "debian-base:1", "10.0.0.1", "api", {"n": 1}
)


def assert_all_there(stores: Stores) -> None:
    assert stores.sessions.list_sessions() == [SESSION]
    assert stores.files.list_files("org-a", "conv-1") == [ATTACHMENT, ARTIFACT]
    assert stores.agents.list_agents("org-a") == [AGENT]
    assert stores.catalog.catalog() == (
        {"debian-base:1": '{"id": "debian-base", "tag": "1"}'},
        {"debian-base": "1"},
    )
    assert stores.audit.list_audit(AuditFilter()) == [AUDIT]
    # Claimed once by 0.1.0: a later claim keeps the first value.
    assert stores.deployment.claim_deployment_id("dep-new") == "dep-0123"
    assert stores.deployment.claim_egress_key("00" * 16) == "ab" * 16
