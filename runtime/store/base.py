"""The store protocols live in ``runtime.seams.stores`` (re-exported for the
implementations beside this module)."""

from runtime.seams.stores import (
    AgentStore as AgentStore,
)
from runtime.seams.stores import (
    AuditStore as AuditStore,
)
from runtime.seams.stores import (
    CapacityStore as CapacityStore,
)
from runtime.seams.stores import (
    CatalogStore as CatalogStore,
)
from runtime.seams.stores import (
    ConsoleSessionStore as ConsoleSessionStore,
)
from runtime.seams.stores import (
    DeletionStore as DeletionStore,
)
from runtime.seams.stores import (
    DeploymentStore as DeploymentStore,
)
from runtime.seams.stores import (
    E2bStore as E2bStore,
)
from runtime.seams.stores import (
    ExecutionStore as ExecutionStore,
)
from runtime.seams.stores import (
    FileStore as FileStore,
)
from runtime.seams.stores import (
    IdempotencyStore as IdempotencyStore,
)
from runtime.seams.stores import (
    LeaseStore as LeaseStore,
)
from runtime.seams.stores import (
    MemoryStore as MemoryStore,
)
from runtime.seams.stores import (
    NetworkRuleStore as NetworkRuleStore,
)
from runtime.seams.stores import (
    PoolStore as PoolStore,
)
from runtime.seams.stores import (
    RevocationStore as RevocationStore,
)
from runtime.seams.stores import (
    SessionStore as SessionStore,
)
from runtime.seams.stores import (
    SnapshotStore as SnapshotStore,
)
from runtime.seams.stores import (
    Stores as Stores,
)
