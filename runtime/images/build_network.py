"""Where a build's ``RUN`` steps may reach: the same as a sandbox, never more.

With no egress allowlist, nowhere (``network_mode="none"``). With one on Docker, the
deployment's sandbox network: it has no route out, and the host's firewall lets it
reach the egress proxy's port alone; the steps get ``HTTP(S)_PROXY`` build arguments
with credentials signed for the build, so the proxy applies the deployment's
allowlist (a package mirror listed there is reachable, cloud metadata and the host's
LAN are not). Docker keeps these predefined arguments out of the image's history.

Egress builds it (``Egress.build_network``): the images layer knows no proxy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

NO_NETWORK = "none"


@dataclass(frozen=True)
class BuildNetwork:
    mode: str = NO_NETWORK
    """The engine's ``network_mode`` for the build's steps."""
    proxy: Callable[[str], dict[str, str]] | None = None
    """A build's identity → its proxy build arguments (``None``: no proxy)."""

    def build_args(self, identity: str) -> dict[str, str]:
        return self.proxy(identity) if self.proxy is not None else {}
