"""Every instance's sandboxes as operators see them: the session records, capacity
against its limits, the warm pool's members and a sandbox's disks, for the console's
pages and the Prometheus gauges. Read only: changes go through the session manager,
the tiers and the conversations' deletion."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.core.errors import SiestaError
from runtime.core.records import PoolMember, SessionRecord
from runtime.seams.providers import SandboxLifecycle, SandboxUsage
from runtime.seams.stores import CapacityStore, PoolStore, SessionStore
from runtime.sessions.capacity import POOL_SLOT_PREFIX
from runtime.sessions.lifecycle import capacity_scopes
from runtime.sessions.settings import CapacitySettings

_SCOPE_ORDER = {"host": 0, "org": 1, "user": 2}


@dataclass(frozen=True)
class CapacityUse:
    """One capacity scope: how many running sandboxes it counts, against its limit."""

    kind: str
    name: str
    used: int
    limit: int
    pool: int = 0
    """Of ``used``: the warm pool's members (the host scope counts them)."""

    @property
    def percent(self) -> int:
        return min(100, round(100 * self.used / self.limit)) if self.limit else 0


class Fleet:
    def __init__(
        self,
        sessions: SessionStore,
        capacity: CapacityStore,
        pool: PoolStore,
        lifecycle: SandboxLifecycle,
        settings: CapacitySettings,
    ) -> None:
        self._sessions = sessions
        self._capacity = capacity
        self._pool = pool
        self._lifecycle = lifecycle
        self._settings = settings

    def records(self) -> list[SessionRecord]:
        """Every conversation's session record, of every org."""
        return self._sessions.list_sessions()

    def record(self, org: str, conversation: str) -> SessionRecord | None:
        return self._sessions.get_session(org, conversation)

    def pool_members(self) -> list[PoolMember]:
        """The warm pool's ready members, every instance's."""
        return self._pool.pool_members()

    def usage(self, record: SessionRecord) -> SandboxUsage | None:
        """What the provider can tell of the sandbox's disks from outside (``None``: it
        cannot say, e.g. a provider without metrics)."""
        try:
            return self._lifecycle.usage(record.sandbox_id)
        except SiestaError:
            return None

    def capacity_use(self, records: list[SessionRecord]) -> list[CapacityUse]:
        """Every org and user that has a session, and this host, against their limits
        (the scopes ``capacity_scopes`` counts a sandbox in)."""
        settings = self._settings
        limits: dict[str, tuple[str, str, int]] = {}
        for record in records:
            for (scope, limit), kind in zip(
                capacity_scopes(settings, record.org, record.user),
                ("org", "user", "host"),
                strict=True,
            ):
                limits[scope] = (kind, scope.split(":", 1)[1], limit)
        host = capacity_scopes(settings, "-", "-")[2]
        limits.setdefault(host[0], ("host", settings.host_id, host[1]))
        uses = []
        for scope, (kind, name, limit) in limits.items():
            members = self._capacity.slot_members(scope)
            pool = sum(member.startswith(POOL_SLOT_PREFIX) for member in members)
            uses.append(CapacityUse(kind, name, len(members), limit, pool))
        return sorted(uses, key=lambda use: (_SCOPE_ORDER[use.kind], use.name))
