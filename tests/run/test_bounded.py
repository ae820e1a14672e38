"""run_bounded: a time limit that holds when the command's children keep its pipes open."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from opbench.run.bounded import run_bounded

# The child starts a grandchild that inherits stdout and outlives it.
HOLDS_PIPE = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("started", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
def test_timeout_kills_the_whole_group_and_keeps_the_output():
    # subprocess.run(timeout=1) would wait ~60 s here for the grandchild's pipe
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as info:
        run_bounded([sys.executable, "-c", HOLDS_PIPE], timeout=2)
    assert time.monotonic() - t0 < 20
    assert "started" in info.value.output


def test_a_finished_command_returns_its_code_and_output():
    p = run_bounded([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], timeout=30)
    assert (p.returncode, p.stdout.strip()) == (3, "out")
