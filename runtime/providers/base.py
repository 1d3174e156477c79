"""The provider protocols live in ``runtime.seams.providers`` (re-exported for the
implementations beside this module)."""

from runtime.seams.providers import (
    CONVERSATION_LABEL as CONVERSATION_LABEL,
)
from runtime.seams.providers import (
    DEPLOYMENT_LABEL as DEPLOYMENT_LABEL,
)
from runtime.seams.providers import (
    IMAGE_LABEL as IMAGE_LABEL,
)
from runtime.seams.providers import (
    LEGACY_MANAGED_LABEL as LEGACY_MANAGED_LABEL,
)
from runtime.seams.providers import (
    ORG_LABEL as ORG_LABEL,
)
from runtime.seams.providers import (
    PACKAGE_INSTALL_CAPABILITIES as PACKAGE_INSTALL_CAPABILITIES,
)
from runtime.seams.providers import (
    POOL_LABEL as POOL_LABEL,
)
from runtime.seams.providers import (
    SESSION_LABEL as SESSION_LABEL,
)
from runtime.seams.providers import (
    SNAPSHOT_DEPLOYMENT_LABEL as SNAPSHOT_DEPLOYMENT_LABEL,
)
from runtime.seams.providers import (
    SNAPSHOT_LABEL as SNAPSHOT_LABEL,
)
from runtime.seams.providers import (
    STOP_GRACE_SECONDS as STOP_GRACE_SECONDS,
)
from runtime.seams.providers import (
    WORKSPACE as WORKSPACE,
)
from runtime.seams.providers import (
    ByteSink as ByteSink,
)
from runtime.seams.providers import (
    DirEntry as DirEntry,
)
from runtime.seams.providers import (
    DirListing as DirListing,
)
from runtime.seams.providers import (
    DiskUsage as DiskUsage,
)
from runtime.seams.providers import (
    ExecRequest as ExecRequest,
)
from runtime.seams.providers import (
    ExecResult as ExecResult,
)
from runtime.seams.providers import (
    LimitPressure as LimitPressure,
)
from runtime.seams.providers import (
    OutputAt as OutputAt,
)
from runtime.seams.providers import (
    OutputEnded as OutputEnded,
)
from runtime.seams.providers import (
    OutputEvent as OutputEvent,
)
from runtime.seams.providers import (
    OutputListener as OutputListener,
)
from runtime.seams.providers import (
    OutputLost as OutputLost,
)
from runtime.seams.providers import (
    ProcessEntry as ProcessEntry,
)
from runtime.seams.providers import (
    ProcessSpec as ProcessSpec,
)
from runtime.seams.providers import (
    RunningProcess as RunningProcess,
)
from runtime.seams.providers import (
    SandboxInfo as SandboxInfo,
)
from runtime.seams.providers import (
    SandboxInside as SandboxInside,
)
from runtime.seams.providers import (
    SandboxLifecycle as SandboxLifecycle,
)
from runtime.seams.providers import (
    SandboxProvider as SandboxProvider,
)
from runtime.seams.providers import (
    SandboxSpec as SandboxSpec,
)
from runtime.seams.providers import (
    SandboxState as SandboxState,
)
from runtime.seams.providers import (
    SandboxUsage as SandboxUsage,
)
from runtime.seams.providers import (
    SnapshotArtifacts as SnapshotArtifacts,
)
from runtime.seams.providers import (
    SnapshotLeftover as SnapshotLeftover,
)
from runtime.seams.providers import (
    WorkspaceInfo as WorkspaceInfo,
)
