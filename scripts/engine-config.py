#!/usr/bin/env python3
"""Adds what Siesta needs to the Docker engine's configuration, keeping the rest.

- ``userns-remap: default`` (unless SIESTA_USERNS_REMAP=0): root in a sandbox is an
  unprivileged user on the host (dockerd makes the ``dockremap`` user).
- with SIESTA_GVISOR=1: the ``runsc`` runtime (gVisor), with its own network off,
  for catalog images that ask for it (``runtime: runsc``).

Prints ``changed`` when the file was written (the engine must restart to use it),
``unchanged`` otherwise; with ``--dry-run`` it writes nothing and prints what it would
do (``changed`` and the keys it would change). Standard library only: it runs before the virtualenv.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

CONFIG = Path(os.environ.get("DOCKER_DAEMON_CONFIG", "/etc/docker/daemon.json"))


def wanted(current: dict[str, object]) -> dict[str, object]:
    config = dict(current)
    if os.environ.get("SIESTA_USERNS_REMAP", "1") != "0":
        config.setdefault("userns-remap", "default")
    if os.environ.get("SIESTA_GVISOR") == "1":
        runsc = shutil.which("runsc") or "/usr/bin/runsc"
        runtimes = dict(config.get("runtimes") or {})  # type: ignore[call-overload]
        runtimes.setdefault("runsc", {"path": runsc, "runtimeArgs": ["--network=none"]})
        config["runtimes"] = runtimes
    return config


def main() -> int:
    current = json.loads(CONFIG.read_text()) if CONFIG.exists() else {}
    config = wanted(current)
    if config == current:
        print("unchanged")
        return 0
    if "--dry-run" in sys.argv[1:]:  # what would change: "changed userns-remap runtimes"
        print(" ".join(["changed", *(k for k in config if config[k] != current.get(k))]))
        return 0
    CONFIG.parent.mkdir(parents=True, exist_ok=True)
    CONFIG.write_text(json.dumps(config, indent=2) + "\n")
    print("changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
