"""The provider settings live in ``runtime.seams.provider_settings`` (re-exported for the
implementations beside this module)."""

from runtime.seams.provider_settings import (
    DockerProviderSettings as DockerProviderSettings,
)
from runtime.seams.provider_settings import (
    FakeProviderSettings as FakeProviderSettings,
)
from runtime.seams.provider_settings import (
    KubernetesProviderSettings as KubernetesProviderSettings,
)
from runtime.seams.provider_settings import (
    ProviderSettings as ProviderSettings,
)
from runtime.seams.provider_settings import (
    SandboxSettings as SandboxSettings,
)
