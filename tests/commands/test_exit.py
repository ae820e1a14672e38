"""The ``opbench`` command leaves without the interpreter's teardown (1.1-1.4 s a run on
the 2-core CPU) but otherwise as Python would: the command's exit code, threads that are
not daemons waited for, ``atexit`` handlers run, output flushed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import atexit, sys, threading, time
    from pathlib import Path
    out = Path(sys.argv[1])

    def late():
        time.sleep(0.5)
        (out / "thread").write_text("done")

    threading.Thread(target=late).start()  # not a daemon: the exit waits for it
    atexit.register(lambda: (out / "atexit").write_text(str((out / "thread").exists())))
    from opbench.cli import main
    sys.argv = ["opbench", *sys.argv[2:]]
    print("before", end="")  # unflushed: the exit flushes it
    main()
    (out / "after").write_text("main returned")  # never: main exits
    """
)


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    return subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), *args], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_a_command_exits_with_its_code_after_threads_and_atexit(tmp_path):
    p = _run(tmp_path, "--help")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.startswith("before") and "Usage" in p.stdout
    assert (tmp_path / "thread").read_text() == "done"
    assert (tmp_path / "atexit").read_text() == "True"  # handlers ran after the thread
    assert not (tmp_path / "after").exists()


def test_bad_usage_keeps_its_exit_code(tmp_path):
    p = _run(tmp_path, "run", "--suite", "no-such-suite")
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert (tmp_path / "atexit").exists()
