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


def test_ctrl_c_is_one_line_exit_130():
    """Ctrl-C in a long search printed Python's 68-line KeyboardInterrupt traceback."""
    p = py("import sys\nfrom simengine import api, cli\n"
           "def stop(cfg):\n    raise KeyboardInterrupt\n"
           f"api.estimate = stop\nsys.exit(cli.main(['estimate', *{SMALL!r}]))")
    assert p.returncode == 130 and p.stdout == "" and p.stderr == "interrupted\n", p.stderr


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


def test_trace_into_a_pipe_nobody_reads_is_one_line_not_a_hang(tmp_path):
    """A FIFO with no reader: opening it for writing waited for a reader for ever; now it is
    refused at once, one line naming --trace, status 2, and the pipe stays a pipe."""
    import os
    import stat

    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    p = subprocess.run([sys.executable, "-m", "simengine", "simulate", *SMALL, "--trace", str(fifo)], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("error: --trace: cannot write") and "no process is reading" in p.stderr, p.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["trace.fifo"]


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


def test_every_subcommand_on_a_full_device_is_one_line_exit_2():
    """search, presets, schema, coverage: their output goes through the same guarded stdout as
    estimate's (simengine/terminal/cli.py StdoutGuard), so ENOSPC is a message, not an internal error."""
    for cmd in ("search --model small --system small --seq-len 1024 --global-batch 8 --set system.num_gpus=1",
                "presets", "schema model", "coverage --model small --system small --strategy small"):
        p = subprocess.run(["bash", "-c", f"'{sys.executable}' -m simengine {cmd} > /dev/full"], cwd=REPO,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 2, (cmd, p.stderr)
        assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: cannot write output: "), (cmd, p.stderr)


def test_user_text_reaches_the_terminal_inert(tmp_path):
    """A JSON key holding an ANSI escape, a carriage return and a newline is shown as \\uXXXX
    escapes in the error line (one line) and in import-hf's warning, and --json output keeps the
    key itself (the same escape, valid JSON)."""
    model = json.loads((REPO / "presets" / "models" / "small.json").read_text())
    model["\x1b[31mFAKE\x1b[0m\rerror: all good\nnext"] = 1
    path = tmp_path / "m.json"
    path.write_text(json.dumps(model))
    p = subprocess.run([sys.executable, "-m", "simengine", "estimate", "--model", str(path), "--system", "small",
                        "--strategy", "small"], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "\x1b" not in p.stderr and "\r" not in p.stderr and "\\u001b[31mFAKE" in p.stderr and "\\u000derror" in p.stderr
    hf = tmp_path / "config.json"
    hf.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                              "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                              "vocab_size": 256, "\x1b[2K\rerror: x": 1, "a\nwarning: forged": 2}))
    p = subprocess.run([sys.executable, "-m", "simengine", "import-hf", str(hf)], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0 and "\x1b" not in p.stderr and "\r" not in p.stderr, p.stderr
    assert [ln for ln in p.stderr.splitlines() if ln.startswith("warning: forged")] == []
    p = subprocess.run([sys.executable, "-m", "simengine", "import-hf", str(hf), "--json"], cwd=REPO, capture_output=True, text=True)
    assert "\x1b" not in p.stdout and set(json.loads(p.stdout)["unmapped"]) >= {"\x1b[2K\rerror: x", "a\nwarning: forged"}


def test_an_error_line_is_capped():
    from simengine.terminal.cli import MAX_LINE, one_line, shown

    line = one_line("x" * (MAX_LINE + 500))
    assert len(line) < MAX_LINE + 40 and line.endswith("(500 more characters)")
    assert shown("a\tb\nc\x1b\x85\u202e") == "a\tb\nc\\u001b\\u0085\\u202e"
    assert json.loads(shown(json.dumps("\x9b\u2028", ensure_ascii=False))) == "\x9b\u2028"   # JSON keeps its meaning


def test_an_atomic_write_keeps_the_files_permissions(tmp_path):
    import os
    import stat

    from simengine.fileio import write_atomic

    old = tmp_path / "kept.json"
    old.write_text("{}")
    old.chmod(0o644)
    write_atomic(old, lambda fh: fh.write("[1]"))
    assert stat.S_IMODE(old.stat().st_mode) == 0o644 and old.read_text() == "[1]"
    new = tmp_path / "new.json"
    mask = os.umask(0o022)
    try:
        write_atomic(new, lambda fh: fh.write("[]"))
    finally:
        os.umask(mask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o644   # what open() would give: 0666 less the umask, not mkstemp's 0600


def test_a_value_that_is_not_finite_is_said_so(capsys):
    """NaN fails every bound, so pydantic's message named the bound ("less than or equal to 100000")."""
    from simengine.cli import main

    for value in ("NaN", "Infinity"):
        assert main(["estimate", "--model", "small", "--system", "small", "--strategy", "small",
                     "--set", f"system.gpu.memory_gib={value}"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: system.gpu.memory_gib: should be a finite number"), err


def test_an_unknown_preset_names_the_option_it_came_from(capsys):
    from simengine.cli import main

    assert main(["estimate", "--model", "nosuch", "--system", "small", "--strategy", "small"]) == 2
    assert capsys.readouterr().err.startswith("error: model: unknown model preset 'nosuch'")


def test_a_value_that_is_not_a_number_is_said_plainly(capsys):
    """pydantic said "Input should be a valid integer, unable to parse string as an integer" (in
    the CLI, the editors and a shared link alike): the one converter says what is wanted and
    quotes what was given, cut to 40 characters."""
    from simengine.cli import main

    for value, said in (("abc", "should be a whole number, not 'abc'"), ("2.5", "should be a whole number, not 2.5"),
                        ("x" * 80, "should be a whole number, not 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...")):
        assert main(["estimate", "--model", "small", "--system", "small", "--strategy", "small",
                     "--set", f"strategy.tp={value}"]) == 2
        assert capsys.readouterr().err.strip() == f"error: strategy.tp: {said}"
    assert main(["estimate", "--model", "small", "--system", "small", "--strategy", "small",
                 "--set", "system.gpu.memory_gib=lots"]) == 2
    assert capsys.readouterr().err.strip() == "error: system.gpu.memory_gib: should be a number, not 'lots'"
