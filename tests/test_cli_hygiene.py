"""CLI output hygiene (subprocess): a closed pipe ends quietly, an unwritable stdout or memory
exhaustion is one line and status 2, and the Chrome trace is written atomically."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--model", "small", "--system", "small", "--strategy", "small"]


def py(code: str, **kw):
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, **kw)


def test_closed_pipe_is_quiet():
    # | head -1 on an output far larger than a pipe buffer: the writer must hit EPIPE
    p = subprocess.run(["bash", "-c", f"'{sys.executable}' -m simengine validate --source b200 --json | head -c 10 >/dev/null; "
                                      "echo \"rc=${PIPESTATUS[0]}\" >&2"], cwd=REPO, capture_output=True, text=True)
    assert p.stderr.strip() == "rc=0", p.stderr
    p = subprocess.run(["bash", "-c", f"'{sys.executable}' -m simengine estimate {' '.join(SMALL)} | head -1"],
                       cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("step time") and p.stderr == "", p.stderr


def test_closed_pipe_before_any_write():
    proc = subprocess.Popen([sys.executable, "-m", "simengine", "schema", "strategy"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the child writes
    err = proc.stderr.read().decode()
    assert proc.wait() == 0 and err == "", err


def test_full_device_is_one_line_exit_2():
    p = subprocess.run(["bash", "-c", f"'{sys.executable}' -m simengine estimate {' '.join(SMALL)} > /dev/full"],
                       cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: cannot write output: "), p.stderr


def test_memory_error_is_one_line_exit_2():
    p = py("import sys\nfrom simengine import api, cli\n"
           "def boom(cfg):\n    raise MemoryError()\n"
           f"api.estimate = boom\nsys.exit(cli.main(['estimate', *{SMALL!r}]))")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: out of memory"), p.stderr


def test_trace_is_written_atomically(tmp_path):
    out = tmp_path / "trace.json"
    p = subprocess.run([sys.executable, "-m", "simengine", "simulate", *SMALL, "--trace", str(out)], cwd=REPO,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "traceEvents" in json.loads(out.read_text()) or isinstance(json.loads(out.read_text()), list)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["trace.json"]  # no temporary file left behind


def test_failed_trace_write_keeps_the_old_file(tmp_path):
    out = tmp_path / "trace.json"
    out.write_text('{"old": true}')
    # the disk fills up while the new trace is being written
    p = py("import errno, os, sys\nfrom simengine import cli, fileio\n"
           "def full(fd):\n    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
           f"fileio.os.fsync = full\nsys.exit(cli.main(['simulate', *{SMALL!r}, '--trace', {str(out)!r}]))")
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: --trace: cannot write") and "No space" in p.stderr
    assert out.read_text() == '{"old": true}'
    assert sorted(x.name for x in tmp_path.iterdir()) == ["trace.json"]


def test_trace_into_a_missing_folder_is_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "simengine", "simulate", *SMALL, "--trace", str(tmp_path / "no" / "t.json")],
                       cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--trace" in p.stderr, p.stderr


def test_trace_into_a_pipe_writes_through_and_keeps_the_pipe(tmp_path):
    """``--trace /dev/stdout`` (or any device or FIFO) is written in place: renaming a temporary file
    onto it replaced the node itself (the trace once turned /dev/full into a plain file)."""
    import os
    import stat
    import threading

    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    p = subprocess.run([sys.executable, "-m", "simengine", "simulate", *SMALL, "--trace", str(fifo)], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    reader.join(60)
    assert p.returncode == 0, p.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert "traceEvents" in json.loads(got[0])
    assert sorted(x.name for x in tmp_path.iterdir()) == ["trace.fifo"]  # no temporary file beside it


def test_trace_through_a_symlink_replaces_the_file_not_the_link(tmp_path):
    real = tmp_path / "real" / "trace.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "trace.json"
    link.symlink_to(real)
    p = subprocess.run([sys.executable, "-m", "simengine", "simulate", *SMALL, "--trace", str(link)], cwd=REPO,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert link.is_symlink() and "traceEvents" in json.loads(real.read_text())
    assert sorted(x.name for x in real.parent.iterdir()) == ["trace.json"]
