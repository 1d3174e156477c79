"""Conversations' network rules and egress refusal counts, and orgs' sealed secrets,
in SQLite.

The egress proxy child opens the same file (WAL: its reads and the service's
writes do not block each other for long).
"""

from __future__ import annotations

import json
from typing import Any

from runtime.core.network_rules import EgressRefusals, NetworkRules
from runtime.core.records import SealedSecret
from runtime.store.sqlite.db import Database


class SqliteNetwork:
    def __init__(self, db: Database) -> None:
        self._db = db

    def set_network_rules(self, org: str, conversation: str, rules: NetworkRules) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO network_rules (org, conversation, body) VALUES (?, ?, ?) "
                "ON CONFLICT (org, conversation) DO UPDATE SET body = excluded.body",
                (org, conversation, rules.to_json()),
            )

    def network_rules(self, org: str, conversation: str) -> NetworkRules | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT body FROM network_rules WHERE org = ? AND conversation = ?",
                (org, conversation),
            ).fetchone()
        return NetworkRules.from_json(row[0]) if row else None

    def add_egress_refusals(
        self, org: str, conversation: str, refusals: EgressRefusals, keep_seconds: float
    ) -> None:
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM egress_refusals WHERE expires_at < ?", (refusals.last_at,))
            conn.execute(
                "INSERT INTO egress_refusals (org, conversation, count, last_host, last_reason,"
                " last_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (org, conversation) DO UPDATE SET count = count + excluded.count,"
                " last_host = excluded.last_host, last_reason = excluded.last_reason,"
                " last_at = excluded.last_at, expires_at = excluded.expires_at",
                (
                    org,
                    conversation,
                    refusals.count,
                    refusals.last_host,
                    refusals.last_reason,
                    refusals.last_at,
                    refusals.last_at + keep_seconds,
                ),
            )

    def egress_refusals(self, org: str, conversation: str) -> EgressRefusals | None:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT count, last_host, last_reason, last_at FROM egress_refusals "
                "WHERE org = ? AND conversation = ?",
                (org, conversation),
            ).fetchone()
        if row is None:
            return None
        count, host, reason, at = row
        return EgressRefusals(int(count), str(host), str(reason), float(at))

    def forget_network(self, org: str, conversation: str) -> None:
        with self._db.transaction() as conn:
            for table in ("network_rules", "egress_refusals"):
                conn.execute(
                    f"DELETE FROM {table} WHERE org = ? AND conversation = ?",
                    (org, conversation),
                )

    def put_secret(self, secret: SealedSecret, limit: int) -> bool:
        with self._db.transaction() as conn:
            known = conn.execute(
                "SELECT created_at FROM egress_secrets WHERE org = ? AND name = ?",
                (secret.org, secret.name),
            ).fetchone()
            if known is None:
                (count,) = conn.execute(
                    "SELECT COUNT(*) FROM egress_secrets WHERE org = ?", (secret.org,)
                ).fetchone()
                if count >= limit:
                    return False
            conn.execute(
                "INSERT INTO egress_secrets (org, name, sealed, created_at, updated_at, size,"
                " hosts, header) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (org, name) DO "
                "UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at, "
                "size = excluded.size, hosts = excluded.hosts, header = excluded.header",
                (
                    secret.org,
                    secret.name,
                    secret.sealed,
                    secret.created_at,
                    secret.updated_at,
                    secret.size,
                    json.dumps(list(secret.hosts)),
                    secret.header,
                ),
            )
        return True

    def secret(self, org: str, name: str) -> SealedSecret | None:
        with self._db.lock:
            row = self._db.conn.execute(
                f"SELECT {_SECRET_COLUMNS} FROM egress_secrets WHERE org = ? AND name = ?",
                (org, name),
            ).fetchone()
        return _secret(row) if row else None

    def org_secrets(self, org: str) -> list[SealedSecret]:
        with self._db.lock:
            rows = self._db.conn.execute(
                f"SELECT {_SECRET_COLUMNS} FROM egress_secrets WHERE org = ? ORDER BY name",
                (org,),
            ).fetchall()
        return [_secret(row) for row in rows]

    def delete_secret(self, org: str, name: str) -> bool:
        with self._db.transaction() as conn:
            gone = conn.execute(
                "DELETE FROM egress_secrets WHERE org = ? AND name = ?", (org, name)
            ).rowcount
        return bool(gone)


_SECRET_COLUMNS = "org, name, sealed, created_at, updated_at, size, hosts, header"


def _secret(row: tuple[Any, ...]) -> SealedSecret:
    org, name, sealed, created_at, updated_at, size, hosts, header = row
    return SealedSecret(
        str(org),
        str(name),
        str(sealed),
        float(created_at),
        float(updated_at),
        int(size),
        tuple(json.loads(hosts)),
        str(header),
    )
