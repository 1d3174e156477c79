"""envd's ``filesystem.Filesystem`` over Connect.

Not served yet: every method answers UNIMPLEMENTED, which the SDKs raise as a
``SandboxException`` (reads and writes work through ``/files``).
"""

from __future__ import annotations

from collections.abc import Callable

from api.e2b.protocol.filesystem.filesystem_connect import Filesystem
from runtime.services import Services


class FilesystemService(Filesystem):
    def __init__(self, services: Callable[[], Services]) -> None:
        self._get_services = services
