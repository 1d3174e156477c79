"""What the console's browser tests share: one Chromium per module."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, sync_playwright


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    executable = shutil.which("chromium")
    assert executable, "no chromium on the PATH (scripts/setup.sh installs Debian's)"
    with sync_playwright() as playwright:
        # As root, chromium's own sandbox cannot start; the test is its only user.
        browser = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        yield browser
        browser.close()
