"""Program problems end to end through the real CLI, on the CPU, in the sandbox.

One suite holds a problem for every verdict the runner must reach: a correct candidate
(single output and a tuple), a wrong one, a crashing one, one that hangs past the
timeout, a missing candidate file, a level-4-like problem that needs Hugging Face hub
files, a too-large one (never allocated), a ``state_dict`` mismatch, a candidate the
static scan blocks, and a ``get_inputs`` that ignores its seed. Then ``--resume``, a
backend judged on whole programs, and ``torch.compile`` as a second baseline.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

LINEAR = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n, m):
        super().__init__()
        self.fc = nn.Linear(n, m)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16, 32]
"""

TUPLE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.tanh(x) * y, (x + y).sum(dim=1)


def get_inputs(size="full"):
    n = 8 if size == "small" else 4096
    return [torch.randn(n, 32), torch.randn(n, 32)]


def get_init_inputs():
    return []


def flops(size="full"):
    return 3 * (8 if size == "small" else 4096) * 32
"""

HUB = """
import torch
from transformers import AutoConfig, AutoModelForCausalLM

model_name = "opbench-test/no-such-model"
config = AutoConfig.from_pretrained(model_name)


class Model(torch.nn.Module):
    def __init__(self, name, config):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(name, config=config)

    def forward(self, x):
        return self.model(x).logits


def get_inputs():
    return [torch.randint(0, 100, (2, 8))]


def get_init_inputs():
    return [model_name, config]
"""

HUGE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(1 << 20, 1 << 12)]  # 16 GiB: must never be allocated


def get_init_inputs():
    return []
"""

UNSEEDED = """
import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.full((4,), float(time.perf_counter_ns() % 100003))]


def get_init_inputs():
    return []
"""


def _cand(body: str) -> str:
    return (
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        + textwrap.indent(textwrap.dedent(body).strip() + "\n", "    ")
    )


LINEAR_INIT = """
def __init__(self, n, m):
    super().__init__()
    self.fc = nn.Linear(n, m)
"""

CANDIDATES = {
    "1_correct": _cand(
        LINEAR_INIT
        + """
def forward(self, x):
    return torch.clamp_min(x @ self.fc.weight.t() + self.fc.bias, 0)
"""
    ),
    "2_wrong": _cand(
        LINEAR_INIT
        + """
def forward(self, x):
    return torch.relu(self.fc(x)) + 1e-2
"""
    ),
    "3_crash": "import ctypes\n\n"
    + _cand(
        LINEAR_INIT
        + """
def forward(self, x):
    ctypes.string_at(0)  # segfault
"""
    ),
    "4_hang": _cand(
        LINEAR_INIT
        + """
def forward(self, x):
    while True:
        pass
"""
    ),
    "8_state_dict": _cand(
        """
def __init__(self, n, m):
    super().__init__()
    self.linear = nn.Linear(n, m)  # another name: Model's weights do not load

def forward(self, x):
    return torch.relu(self.linear(x))
"""
    ),
    "9_reseeds": _cand(
        LINEAR_INIT
        + """
def forward(self, x):
    torch.manual_seed(0)
    return torch.relu(self.fc(x))
"""
    ),
    "10_tuple": _cand(
        """
def __init__(self):
    super().__init__()

def forward(self, x, y):
    return torch.tanh(x) * y, torch.sum(x + y, dim=1)
"""
    ),
    "11_unseeded": _cand(
        """
def __init__(self):
    super().__init__()

def forward(self, x):
    return x + x
"""
    ),
    "6_hub": _cand("def forward(self, x):\n    return x\n"),
    "7_huge": _cand("def forward(self, x):\n    return torch.relu(x)\n"),
}

PROBLEMS = {
    "1_correct": LINEAR,
    "2_wrong": LINEAR,
    "3_crash": LINEAR,
    "4_hang": LINEAR,
    "5_missing": LINEAR,
    "6_hub": HUB,
    "7_huge": HUGE,
    "8_state_dict": LINEAR,
    "9_reseeds": LINEAR,
    "10_tuple": TUPLE,
    "11_unseeded": UNSEEDED,
}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    env["COLUMNS"] = "250"
    env["HF_HUB_OFFLINE"] = "1"  # the hub problem must fail here, never download
    return env


def _opbench(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "opbench.cli", "run", *args],
        env={**_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _finished(run_dir: Path) -> dict[str, float]:
    con = sqlite3.connect(f"file:{run_dir / 'results.sqlite'}?mode=ro", uri=True)
    try:
        return dict(con.execute("SELECT test_id, finished_at FROM results").fetchall())
    finally:
        con.close()


def _write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / "level1" / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("programs")
    _write_tree(tmp / "problems", PROBLEMS)
    _write_tree(tmp / "candidates", CANDIDATES)
    out = tmp / "run"
    args = [
        "--suite",
        f"programs:{tmp / 'problems'}",
        "--candidates",
        str(tmp / "candidates"),
        "--device",
        "cpu",
        "--out",
        str(out),
        "--sandbox",
        "auto",
        "--allow",
        "native-code",  # the crashing candidate's ctypes gets past the scan
        "--test-timeout",
        "15",
        "--n-correctness",
        "3",
        "--quiet",
    ]
    p = _opbench(*args)
    assert p.returncode == 0, p.stderr[-3000:]
    return tmp, out, args, json.loads((out / "summary.json").read_text())


def test_every_verdict(suite_run):
    _, out, _, summary = suite_run
    got = {k: (v["status"], v["category"]) for k, v in summary["problems"].items()}
    assert got == {
        "level1/1_correct": ("passed", None),
        "level1/2_wrong": ("failed", "wrong_result"),
        "level1/3_crash": ("failed", "crash"),
        "level1/4_hang": ("failed", "timeout"),
        "level1/5_missing": ("not_implemented", "not_implemented"),
        "level1/6_hub": ("skipped", "not_runnable"),
        "level1/7_huge": ("skipped", "not_runnable"),
        "level1/8_state_dict": ("failed", "wrong_meta"),
        "level1/9_reseeds": ("failed", "tampering"),
        "level1/10_tuple": ("passed", None),
        "level1/11_unseeded": ("skipped", "not_runnable"),
    }
    problems = summary["problems"]
    assert "state_dict mismatch" in problems["level1/8_state_dict"]["message"]
    assert "Hugging Face hub" in summary["not_runnable"]["level1/6_hub"] or (
        "transformers" in summary["not_runnable"]["level1/6_hub"]
    )
    assert summary["not_runnable"]["level1/7_huge"].startswith("too large")
    assert "seed" in summary["not_runnable"]["level1/11_unseeded"]
    assert "static scan" in problems["level1/9_reseeds"]["message"]
    # the denominator: the 8 problems that ran here, not the 3 that cannot
    assert summary["problems_in_denominator"] == 8
    assert summary["correctness_score"] == pytest.approx(2 / 8)
    assert set(summary["ops"]) == {k for k, v in got.items() if v[0] != "skipped"}
    assert (out / "report.html").read_text().count("level1/1_correct") >= 1
    assert summary["sandbox"] in ("bwrap", "none")


def test_speed_is_timed_live_against_eager(suite_run):
    _, _, _, summary = suite_run
    rec = summary["problems"]["level1/1_correct"]
    assert rec["eager_ms"] > 0 and rec["candidate_ms"] > 0
    assert rec["speedup"] == pytest.approx(rec["eager_ms"] / rec["candidate_ms"], rel=1e-6)
    assert summary["timer"] == "cpu-wall"
    fast = summary["fast_p"]
    assert set(fast) == {"0", "0.5", "0.8", "1.0", "1.2", "1.5", "2.0"}  # KernelBench's
    assert fast["0"] == pytest.approx(2 / 8)
    for p in (0.5, 0.8, 1.0, 1.2, 1.5, 2.0):
        faster = sum(
            1
            for k in ("level1/1_correct", "level1/10_tuple")
            if summary["problems"][k]["speedup"] > p
        )
        assert fast[f"{p:.1f}"] == pytest.approx(faster / 8)
    # one level here: its own fast_p is the run's
    assert summary["levels"] == {"1": {"problems": 8, "correct": 2, "fast_p": fast}}
    # the problem's own FLOP count, at the size the CPU run used (small)
    assert summary["problems"]["level1/10_tuple"]["work"]["flops"] == 3 * 8 * 32


def test_resume_keeps_finished_problems(suite_run):
    _, out, args, summary = suite_run
    before = _finished(out)
    p = _opbench(*args, "--resume")
    assert p.returncode == 0, p.stderr[-3000:]
    again = json.loads((out / "summary.json").read_text())
    assert again["resumed"] is True
    assert again["problems"] == summary["problems"]
    assert _finished(out) == before  # nothing ran again
    changed = [a if a != "3" else "2" for a in args]  # another --n-correctness
    p = _opbench(*changed, "--resume")
    assert p.returncode == 2
    assert "n_correctness" in p.stderr


RELU_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""

TANH_PROBLEM = RELU_PROBLEM.replace("torch.relu(x)", "torch.tanh(x)")

WRONG_RELU_KERNEL = """
import numpy as np
import torch


def relu__default_kernel_impl(x):
    a = x.detach().cpu().numpy()
    return torch.from_numpy(np.maximum(a, 0.5).astype(a.dtype))  # wrong below 0.5
"""


def test_backend_is_judged_on_whole_programs(tmp_path):
    _write_tree(tmp_path / "problems", {"1_relu": RELU_PROBLEM, "2_tanh": TANH_PROBLEM})
    kernels = tmp_path / "kernels" / "relu__default"
    kernels.mkdir(parents=True)
    (kernels / "relu__default_implementation.py").write_text(WRONG_RELU_KERNEL)
    out = tmp_path / "run"
    p = _opbench(
        "--suite",
        f"programs:{tmp_path / 'problems'}",
        "--backend",
        str(tmp_path / "kernels"),
        "--out",
        str(out),
        "--no-perf",
        "--quiet",
        "--n-correctness",
        "2",
    )
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    got = {k: (v["status"], v["category"]) for k, v in summary["problems"].items()}
    # the model that calls relu ran on the backend's (wrong) kernel; tanh is not served
    assert got == {"level1/1_relu": ("failed", "wrong_result"), "level1/2_tanh": ("passed", None)}
    assert summary["backend"] == str(tmp_path / "kernels")
    assert summary["fast_p"]["1.0"] is None  # --no-perf: nothing timed


def test_single_problem_with_compile_baseline(tmp_path):
    problem = tmp_path / "linear.py"
    problem.write_text(textwrap.dedent(LINEAR))
    cand = tmp_path / "linear_new.py"
    cand.write_text(CANDIDATES["1_correct"])
    out = tmp_path / "run"
    cache = tmp_path / "compile-cache"

    def run(out: Path) -> dict:
        p = _opbench(
            "--problem",
            str(problem),
            "--candidate",
            str(cand),
            "--compile-baseline",
            "--n-correctness",
            "2",
            "--out",
            str(out),
            "--quiet",
            env={"OPBENCH_COMPILE_CACHE": str(cache)},
        )
        assert p.returncode == 0, p.stderr[-3000:]
        con = sqlite3.connect(f"file:{out / 'results.sqlite'}?mode=ro", uri=True)
        try:
            (details,) = con.execute("SELECT details FROM results").fetchone()
        finally:
            con.close()
        return json.loads(details)

    first = run(out)
    summary = json.loads((out / "summary.json").read_text())
    rec = summary["problems"]["linear"]
    assert rec["status"] == "passed", rec
    assert summary["baselines"] == ["eager", "torch.compile"]
    if rec.get("compile_error"):  # no C++ compiler here: said so, eager still timed
        pytest.skip(f"torch.compile unavailable: {rec['compile_error']}")
    assert rec["compile_ms"] > 0 and rec["speedup_compile"] > 0
    assert set(summary["fast_p_compile"]) == {"0", "0.5", "0.8", "1.0", "1.2", "1.5", "2.0"}
    assert summary["levels"][""]["fast_p_compile"] == summary["fast_p_compile"]
    assert summary["performance_score_compile"] == pytest.approx(rec["speedup_compile"])
    # the harness compiled it ahead into the cache; the sandboxed worker started from it
    assert first["compile_cache"]["hit"] is False and first["compile_cache"]["compile_s"] > 0
    assert (Path(first["compile_cache"]["path"]) / "complete.json").is_file()
    assert first["compile"]["cache_files"] > 0 and first["compile"]["compile_s"] > 0
    # a second run (another run directory) finds the entry: nothing compiled ahead again
    second = run(tmp_path / "run2")
    assert second["compile_cache"] == {"path": first["compile_cache"]["path"], "hit": True}
    assert second["compile"]["cache_files"] == first["compile"]["cache_files"]
