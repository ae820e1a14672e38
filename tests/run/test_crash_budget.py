"""``--max-crashes-per-op N``: an op's kernel is tried until it has crashed N times, then
its other tests are recorded ``not_run``. A kernel whose worker dies importing it crashes
once a test, not twice: the executor counted such a death when the worker failed to load
and again when the test's crash was recorded, so ``--max-crashes-per-op 3`` stopped after
two tests."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

#: importing this kernel kills its worker (a segfault)
DIES_AT_IMPORT = """
import faulthandler

faulthandler._sigsegv()


def neg__default_kernel_impl(x):
    return -x
"""


def _run(tmp_path: Path, limit: int, tests: int, plan_in: str) -> Counter:
    kernels = tmp_path / "kernels" / "neg__default"
    kernels.mkdir(parents=True)
    (kernels / "neg__default_implementation.py").write_text(DIES_AT_IMPORT)
    lines = ["Operator: aten.neg.default"]
    lines += [f"cnt: {tests - n}, ((T([{n + 2}], f32),), {{}})" for n in range(tests)]
    traces = tmp_path / "traces.txt"
    traces.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    env["OPBENCH_PLAN_IN"] = plan_in
    p = subprocess.run(
        [sys.executable, "-m", "opbench.cli", "run", "--suite", f"traces:{traces}",
         "--backend", str(tmp_path / "kernels"), "--no-perf", "--out", str(out),
         "--max-crashes-per-op", str(limit), "--workers", "1"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode in (0, 1), p.stderr[-3000:]
    con = sqlite3.connect(out / "results.sqlite")
    try:
        rows = con.execute("SELECT status, category FROM results").fetchall()
    finally:
        con.close()
    return Counter(rows)


@pytest.mark.parametrize("plan_in", ["thread", "process"])
def test_a_kernel_that_kills_its_worker_at_import_uses_one_crash_a_test(tmp_path, plan_in):
    """Judged on the harness's threads (the CPU's default) and in a judging process a
    slot (the GPU's): three crashes, then two tests not run."""
    got = _run(tmp_path, limit=3, tests=5, plan_in=plan_in)
    assert sum(got.values()) == 5, got
    crashed = sum(n for (status, category), n in got.items() if category == "crash"
                  and status != "not_run")  # fmt: skip
    assert crashed == 3, got
    assert got[("not_run", "crash")] == 2, got
