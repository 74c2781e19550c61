"""Install headless Chromium for the browser tests (tests/browser), on a fresh machine.

Tries Playwright's own build first (`playwright install --with-deps chromium`, which also pulls
the system libraries through apt); where its download host is unreachable, falls back to Debian's
`chromium` package (the tests use /usr/bin/chromium then). Never fails the caller: without any
browser the browser tests skip with a reason and everything else still runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys


def run(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def main() -> int:
    if run([sys.executable, "-m", "playwright", "install", "--with-deps", "chromium"]):
        print("browser: playwright chromium installed")
        return 0
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        print("browser: using the system chromium")
        return 0
    apt = shutil.which("apt-get")
    if apt and hasattr(os, "geteuid") and os.geteuid() == 0:
        env_ok = run([apt, "update", "-qq"]) and run([apt, "install", "-y", "-qq", "chromium"])
        if env_ok and (shutil.which("chromium") or shutil.which("chromium-browser")):
            print("browser: Debian chromium installed")
            return 0
    print("browser: no Chromium could be installed; the browser tests will be skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
