"""``opbench repro`` scripts re-run the check that failed, print its evidence and exit 1;
once the kernel is fixed the same script exits 0. One numpy kernel per failure category
(numpy, so that only the intended category fails), run through the written script."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from opbench.commands.repro import render_script
from opbench.suites.case import Case

SRC = str(Path(__file__).resolve().parents[2] / "src")

HEADER = "import numpy as np\nimport torch\n\n"

#: category -> (overload, kernel folder, kernel body, evidence the script must print)
BAD = {
    "mutates_input": (
        "relu.default",
        "relu",
        """
        def relu_kernel_impl(x):
            r = torch.from_numpy(np.maximum(x.numpy(), 0))
            x.numpy()[3] = 7.0
            return r
        """,
        "mutates_input: args[0] changed at 1 of 64 elements, first [[3]]",
    ),
    "bad_alias": (
        "relu_.default",
        "relu_",
        """
        def relu__kernel_impl(x):
            x.numpy()[...] = np.maximum(x.numpy(), 0)
            return torch.from_numpy(x.numpy().copy())
        """,
        "bad_alias: output 0 is not the tensor the op must write and return",
    ),
    "calls_pytorch": (
        "relu.default",
        "relu",
        """
        def relu_kernel_impl(x):
            return torch.clamp(x, min=0)
        """,
        "calls_pytorch: the kernel called PyTorch compute ops: clamp",
    ),
    "nondeterministic": (
        "relu.default",
        "relu",
        """
        CALLS = [0]

        def relu_kernel_impl(x):  # 0, 1 or 2 ulps off, by call number
            CALLS[0] += 1
            r = np.maximum(x.numpy(), 0)
            for _ in range(CALLS[0] % 3):
                r[0] = np.nextafter(r[0], np.float32(np.inf))
            return torch.from_numpy(r)
        """,
        "nondeterministic: output differs between two runs",
    ),
    "wrong_meta": (
        "relu.default",
        "relu",
        """
        def relu_kernel_impl(x):
            return torch.from_numpy(np.maximum(x.numpy(), 0).astype(np.float64))
        """,
        "output: wrong_meta: got Tensor[64] torch.float64",
    ),
    "nan_mismatch": (
        "relu.default",
        "relu",
        """
        def relu_kernel_impl(x):
            r = np.maximum(x.numpy(), 0)
            r[5] = np.nan
            return torch.from_numpy(r)
        """,
        "output: nan_mismatch: NaN where PyTorch has none at [[5]]",
    ),
}

FIXED = {
    "relu": """
        def relu_kernel_impl(x):
            return torch.from_numpy(np.maximum(x.numpy(), 0))
        """,
    "relu_": """
        def relu__kernel_impl(x):
            x.numpy()[...] = np.maximum(x.numpy(), 0)
            return x
        """,
}


def _write(kdir: Path, folder: str, body: str) -> None:
    (kdir / folder).mkdir(parents=True, exist_ok=True)
    (kdir / folder / f"{folder}_implementation.py").write_text(HEADER + textwrap.dedent(body))


def _run(script: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.slow
@pytest.mark.parametrize("category", sorted(BAD))
def test_repro_shows_the_failing_check_then_passes_once_fixed(category: str, tmp_path: Path):
    op, folder, body, evidence = BAD[category]
    kdir = tmp_path / "kernels"
    _write(kdir, folder, body)
    case = Case(op=op, args="((T([64], f32),), {})", suite="t", seed=0)
    row = {
        "test_id": case.test_id,
        "case_json": json.dumps(case.to_dict()),
        "status": "failed",
        "category": category,
        "message": "",
        "backend": str(kdir),
        "device": "cpu",
        "details": "{}",
    }
    script = tmp_path / "repro.py"
    script.write_text(render_script(row))
    bad = _run(script)
    assert bad.returncode == 1, bad.stdout[-3000:] + bad.stderr[-3000:]
    assert evidence in bad.stdout, bad.stdout[-3000:]
    assert f"opbench verdict: failed {category}" in bad.stdout, bad.stdout[-1500:]
    _write(kdir, folder, FIXED[folder])
    good = _run(script)
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr[-3000:]
    assert "FAIL" not in good.stdout and "the test passes" in good.stdout


@pytest.mark.slow
def test_repro_profile_writes_a_chrome_trace_of_both_sides(tmp_path: Path):
    """``opbench repro RUN TEST --profile F``: the script runs in its own process and
    writes a torch.profiler trace with the reference's and the candidate's calls marked."""
    kdir = tmp_path / "kernels"
    _write(kdir, "relu", FIXED["relu"])
    out = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run(
        [
            sys.executable, "-m", "opbench.cli", "run", "--suite", "smoke", "--backend",
            str(kdir), "--device", "cpu", "--ops", "relu.default", "--no-perf", "--out",
            str(out), "--quiet",
        ],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    test_id = (
        sqlite3.connect(out / "results.sqlite").execute("select test_id from results").fetchone()[0]
    )
    trace = tmp_path / "trace.json"
    r = subprocess.run(
        [sys.executable, "-m", "opbench.cli", "repro", str(out), test_id, "--profile", str(trace)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    names = {e.get("name") for e in json.loads(trace.read_text())["traceEvents"]}
    assert {"opbench::reference", "opbench::candidate"} <= names
    assert "aten::relu" in names  # the reference's own op, as the profiler saw it
