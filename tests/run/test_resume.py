"""Kill a run with SIGKILL midway, resume it, and get the same summary as a run that was
never interrupted: no test lost, none counted twice. And ``--resume`` on a run
directory made for another suite is refused with one line and exit code 2."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

SLOW_RELU = """
import time

import numpy as np
import torch


def relu__default_kernel_impl(x):
    time.sleep(0.1)  # slow enough that the run can be killed halfway
    a = x.detach().cpu().numpy()
    return torch.from_numpy(np.maximum(a, 0).astype(a.dtype))
"""
SEGFAULT = """
import ctypes


def neg__default_kernel_impl(x):
    ctypes.string_at(0)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    env["COLUMNS"] = "250"  # keep rich from wrapping the one-line errors
    return env


def _cmd(traces: Path, kernels: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "opbench.cli",
        "run",
        "--suite",
        f"traces:{traces}",
        "--backend",
        str(kernels),
        "--no-perf",
        "--out",
        str(out),
        "--sandbox",
        "auto",
        "--max-crashes-per-op",
        "2",
        *extra,
    ]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("resume")
    kernels = tmp / "kernels"
    for folder, text in (("relu__default", SLOW_RELU), ("neg__default", SEGFAULT)):
        (kernels / folder).mkdir(parents=True)
        (kernels / folder / f"{folder}_implementation.py").write_text(textwrap.dedent(text))
    lines = ["Operator: aten.relu.default"]
    lines += [f"cnt: {20 - n}, ((T([{n + 3}, 7], f32),), {{}})" for n in range(14)]
    lines += ["Operator: aten.neg.default"]
    lines += [f"cnt: {5 - n}, ((T([{n + 2}], f32),), {{}})" for n in range(3)]
    traces = tmp / "traces.txt"
    traces.write_text("\n".join(lines) + "\n")
    return tmp, traces, kernels


def _rows(db: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return con.execute("SELECT test_id, status FROM results").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


def _comparable(summary: dict) -> dict:
    keep = ("correctness_score", "performance_score", "fast_p", "tests", "ops", "not_tested")
    return {k: summary.get(k) for k in keep}


def test_killed_run_resumes_to_the_same_summary(setup):
    tmp, traces, kernels = setup
    whole = tmp / "whole"
    p = subprocess.run(
        _cmd(traces, kernels, whole), env=_env(), capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr[-3000:]
    expected = json.loads((whole / "summary.json").read_text())
    total = expected["tests"]["total"]
    assert total == 17

    cut = tmp / "cut"
    proc = subprocess.Popen(
        _cmd(traces, kernels, cut), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    db = cut / "results.sqlite"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if db.exists() and len(_rows(db)) >= 5:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stderr.close()
    before = _rows(db)
    assert 5 <= len(before) < total, len(before)
    assert not (cut / "summary.json").exists()

    p = subprocess.run(
        _cmd(traces, kernels, cut, "--resume"),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    after = _rows(db)
    ids = [t for t, _ in after]
    assert len(ids) == len(set(ids)) == total  # nothing lost, nothing twice
    assert set(before) <= set(after)  # finished tests were kept, not re-run
    resumed = json.loads((cut / "summary.json").read_text())
    assert resumed["resumed"] is True
    assert _comparable(resumed) == _comparable(expected)
    # the progress line's statuses count this part; the earlier part shows as resumed
    assert f"resumed={len(before)}" in p.stderr, p.stderr[-2000:]
    print(f"killed after {len(before)}/{total} results; resumed to the same summary")


def test_resume_from_another_suite_is_refused(setup):
    tmp, traces, kernels = setup
    out = tmp / "other"
    db = out / "results.sqlite"
    out.mkdir()
    # A run directory recorded for the smoke suite.
    from opbench.run.session import RunRequest
    from opbench.run.store import ResultStore

    store = ResultStore(db)
    store.check_same_run(RunRequest(suite="smoke", backend=str(kernels)).identity())
    store.close()
    p = subprocess.run(
        _cmd(traces, kernels, out, "--resume"),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "holds a different run" in errors[0], p.stderr
    assert "Traceback" not in p.stderr
