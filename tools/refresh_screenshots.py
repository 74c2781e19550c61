"""Run the browser tests and copy the screenshots the README uses into assets/screenshots/.

The tests write every screenshot to tests/.artifacts/screenshots/ (git-ignored), so a test run
never dirties the checkout; this tool is the one deliberate step that updates the README images.

    python tools/refresh_screenshots.py            # run the browser tests (tests/browser/), then copy
    python tools/refresh_screenshots.py --no-run   # only copy what the last run left
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / ".artifacts" / "screenshots"
ASSETS = ROOT / "assets" / "screenshots"
README = ROOT / "README.md"
TIMEOUT_S = 1800


def readme_images() -> list[str]:
    """File names of the screenshots README.md shows (``assets/screenshots/<name>.png``)."""
    return sorted(set(re.findall(r"assets/screenshots/([\w.-]+\.png)", README.read_text(encoding="utf-8"))))


def copy_atomic(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.", suffix=".tmp")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        Path(tmp).replace(dst)
    finally:
        if Path(tmp).exists():
            Path(tmp).unlink()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-run", action="store_true", help="copy the screenshots of the last test run only")
    args = ap.parse_args(argv)
    if not args.no_run:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/browser"]
        rc = subprocess.run(cmd, cwd=ROOT, timeout=TIMEOUT_S).returncode
        if rc != 0:
            print(f"browser tests failed (exit {rc}); README screenshots left unchanged", file=sys.stderr)
            return rc
    missing = [n for n in readme_images() if not (ARTIFACTS / n).is_file()]
    if missing:
        print(f"no screenshot for {', '.join(missing)} in {ARTIFACTS}", file=sys.stderr)
        return 1
    for name in readme_images():
        copy_atomic(ARTIFACTS / name, ASSETS / name)
        print(f"assets/screenshots/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
