"""Every Redis key the service uses, in one place.

``{key}`` below is a conversation key, ``org/conversation`` (``/`` never occurs
in ids, so keys cannot collide across orgs).
"""

from __future__ import annotations

PREFIX = "siesta:"

SESSIONS = PREFIX + "sessions"
"""Set of the conversation keys that have a session record."""
DELETED = PREFIX + "deleted"
"""Set of conversation keys deleted while busy, waiting for their teardown."""
DEPLOYMENT_ID = PREFIX + "deployment-id"
"""String: the id that labels everything this deployment creates (set once, NX)."""
EGRESS_KEY = PREFIX + "egress-key"
"""String: hex key that signs sandboxes' egress-proxy credentials (set once, NX)."""
EGRESS_REVOCATIONS = PREFIX + "egress-revocations"
"""Stream: deleted conversations whose egress credentials are revoked (``org``,
``conversation``, ``at``), entry ids in the milliseconds of ``at`` (never going back),
trimmed by age; egress proxies read it on from the last id they saw."""
FENCE_COUNTER = PREFIX + "fence"
"""One counter for every lease's fence: it only grows, across all conversations."""
SCHEMA_VERSION = PREFIX + "schema-version"
"""String: how many of the Redis store's migrations have run (``redis/migrations.py``);
absent in a store of release 0.1.0, which recorded none."""
SCHEMA_LOCK = PREFIX + "schema-lock"
"""String: held (redis-py's lock, with a TTL) by the one instance migrating the store."""


def session(key: str) -> str:
    """Hash: the session record's fields, plus ``fence``."""
    return f"{PREFIX}session:{key}"


def lease(key: str) -> str:
    """String: the holder's owner token, with the lease TTL as its expiry."""
    return f"{PREFIX}lease:{key}"


def lease_released(key: str) -> str:
    """List: a wake-up token pushed on release, popped by one waiter (BLPOP)."""
    return f"{PREFIX}lease-released:{key}"


def slots(scope: str) -> str:
    """Set: the conversation keys counted against a capacity scope."""
    return f"{PREFIX}slots:{scope}"


POOL = PREFIX + "pool"
"""Sorted set: ready pool members (``image/sandbox/session``), scored by creation time."""


def pool_arrivals(image_id: str) -> str:
    """Sorted set: when new conversations asked for a sandbox of the image (members
    are unique tokens, scored by the time)."""
    return f"{PREFIX}pool-arrivals:{image_id}"


def file(file_id: str) -> str:
    """Hash: one conversation file's metadata."""
    return f"{PREFIX}file:{file_id}"


def files(key: str) -> str:
    """Sorted set: a conversation's file ids, scored by creation time."""
    return f"{PREFIX}files:{key}"


def staged(key: str) -> str:
    """Hash: what was staged into a conversation's sandbox: ``=session`` (the session
    counted), ``=total`` (bytes), and ``f:<file id>:<sha256>`` -> bytes per file."""
    return f"{PREFIX}staged:{key}"


EXECUTION_PREFIX = PREFIX + "execution:"


def execution(org: str, execution_id: str) -> str:
    """Hash: one Tool Execution (``status``, the JSON ``body``, its ``conversation``)."""
    return f"{EXECUTION_PREFIX}{org}/{execution_id}"


def executions(org: str) -> str:
    """Sorted set: an org's execution ids, scored by creation time."""
    return f"{PREFIX}executions:{org}"


def conversation_executions(key: str) -> str:
    """Sorted set: a conversation's execution ids, scored by creation time (what its
    deletion removes)."""
    return f"{PREFIX}conversation-executions:{key}"


def cancelled_approval(org: str, execution_id: str) -> str:
    """String: the deadline of an approval cancelled because its conversation was
    deleted, expiring at that deadline."""
    return f"{PREFIX}approval-cancelled:{org}/{execution_id}"


EXECUTIONS_BY_TIME = PREFIX + "executions-by-time"
"""Sorted set: every org's executions (``org/id``), scored by creation time (retention)."""
EXECUTIONS_INDEXED = PREFIX + "executions-indexed"
"""String: set once the executions an earlier version wrote are in ``EXECUTIONS_BY_TIME``."""
EXECUTIONS_BY_CONVERSATION_INDEXED = PREFIX + "executions-by-conversation-indexed"
"""String: set once the executions an earlier version wrote are in their conversation's
``conversation_executions`` set."""
APPROVALS_PENDING = PREFIX + "approvals-pending"
"""Sorted set: executions waiting for approval (``org/id``), scored by their deadline."""


def idempotency(key: str) -> str:
    """Hash: an ``Idempotency-Key`` (scoped ``token/org/key``): ``fingerprint``,
    ``owner`` (of the latest claim), ``attempt``, ``dispatched`` (where a run was handed
    over), then ``status``, ``contentType``, ``body`` (base64) and ``kept``; expires
    with the TTL from the first claim, then from the answer."""
    return f"{PREFIX}idempotency:{key}"


def idempotency_hold(key: str) -> str:
    """String: the owner of a running claim on an idempotency key, expiring with its hold."""
    return f"{PREFIX}idempotency-hold:{key}"


def conversation_keys(key: str) -> str:
    """Set: the idempotency keys claimed for a conversation (``org/conversation``), which
    its deletion removes."""
    return f"{PREFIX}conversation-idempotency:{key}"


def e2b_sandboxes(org: str) -> str:
    """Hash: the org's E2B sandboxes, sandbox id → the record as JSON."""
    return f"{PREFIX}e2b:{org}"


E2B_ENDS = PREFIX + "e2b-ends"
"""Sorted set: every E2B sandbox (``org/sandbox id``) scored by when its timeout passes."""
E2B_ORGS = PREFIX + "e2b-orgs"
"""Hash: E2B sandbox id → its org (envd calls name only the sandbox)."""


def network_rules(key: str) -> str:
    """String: a conversation's own network rules as JSON (until it is deleted)."""
    return f"{PREFIX}network-rules:{key}"


def egress_refusals(key: str) -> str:
    """Hash: how many of a conversation's requests egress proxies refused (``count``)
    and the last one (``host``, ``reason``, ``at``), expiring a while after it."""
    return f"{PREFIX}egress-refusals:{key}"


def egress_secrets(org: str) -> str:
    """Hash: the org's sealed secrets, name → the record as JSON (never a plain value)."""
    return f"{PREFIX}egress-secrets:{org}"


def snapshots(org: str) -> str:
    """Hash: the org's snapshots, snapshot id → the record as JSON."""
    return f"{PREFIX}snapshots:{org}"


SNAPSHOT_ORGS = PREFIX + "snapshot-orgs"
"""Hash: snapshot id → its org (clean-up lists every org's ids)."""


def agents(org: str) -> str:
    """Hash: the org's registered agents, agent id → the record as JSON."""
    return f"{PREFIX}agents:{org}"


def memory_banks(org: str) -> str:
    """Hash: the org's memory banks, bank id → the record as JSON."""
    return f"{PREFIX}memory-banks:{org}"


def memory_keys(org: str, bank_id: str) -> str:
    """Set: the partition keys a memory bank has entries under (what deleting it removes)."""
    return f"{PREFIX}memory-keys:{org}/{bank_id}"


def memory_entries(org: str, bank_id: str, key: str) -> str:
    """List: one memory bank key's entries as JSON, oldest first (the partition key comes
    last and org and bank ids hold no ``/``, so two banks' keys never collide)."""
    return f"{PREFIX}memory:{org}/{bank_id}/{key}"


def knowledge_bases(org: str) -> str:
    """Hash: the org's knowledge bases, base id → the record as JSON."""
    return f"{PREFIX}knowledge-bases:{org}"


def knowledge_generations(org: str) -> str:
    """Hash: base id → how many times what its search sees changed."""
    return f"{PREFIX}knowledge-generations:{org}"


def knowledge_chunk_counts(org: str) -> str:
    """Hash: base id → its chunks, and version id → its own (both kinds of ids are
    prefixed apart: ``kb`` and ``cv``)."""
    return f"{PREFIX}knowledge-chunk-counts:{org}"


def knowledge_versions(org: str, base_id: str) -> str:
    """Hash: a base's content versions, version id → the record as JSON."""
    return f"{PREFIX}knowledge-versions:{org}/{base_id}"


def knowledge_version_bases(org: str) -> str:
    """Hash: version id → its base (a version is found by its id alone)."""
    return f"{PREFIX}knowledge-version-bases:{org}"


def knowledge_chunks(org: str, version_id: str) -> str:
    """String: a version's chunks, serialised (``runtime/store/redis/knowledge.py``)."""
    return f"{PREFIX}knowledge-chunks:{org}/{version_id}"


KNOWLEDGE_PENDING = f"{PREFIX}knowledge-pending"
"""Sorted set: ``org/version id`` of versions to index, scored by when an indexer may
take them (a taken one comes back when its indexer has not finished in time)."""


CATALOG_IMAGES = f"{PREFIX}catalog:images"
"""Hash: every catalog image version, ``id:tag`` → its JSON."""

CATALOG_DEFAULTS = f"{PREFIX}catalog:defaults"
"""Hash: image id → its default tag."""


def image_build(build_id: str) -> str:
    """String: one image build's record as JSON."""
    return f"{PREFIX}image-build:{build_id}"


def image_build_log(build_id: str) -> str:
    """List: one image build's log lines, in order."""
    return f"{PREFIX}image-build-log:{build_id}"


def image_builds(ref: str) -> str:
    """Sorted set: an image version's build ids by start time."""
    return f"{PREFIX}image-builds:{ref}"


AUDIT = f"{PREFIX}audit"
"""Sorted set: audit entries as JSON, by time."""


def console_session(id_digest: str) -> str:
    """String: an operator's web console session as JSON, under the SHA-256 of its
    cookie's id, expiring with the session."""
    return f"{PREFIX}console-session:{id_digest}"
