"""What the judge's hardening costs: the same run before and after, on kernels that
delegate to PyTorch.

Builds a kernel directory with one folder per overload a suite reaches, each kernel
calling that ATen overload itself (so every test runs real candidate code, through the
per-op workers, the call observer, the fingerprint and the static scan; ``aten`` would
skip the guard), and runs ``opbench run ... --allow-pytorch --no-perf`` on it with this
checkout and with a baseline checkout (``--baseline-src``: the ``src`` folder of an older
commit, e.g. from ``git worktree add /tmp/base a2d4be4``). Both runs must give the same
verdicts; the script reports wall times, the overhead, and any verdict that differs.

Usage:
  python benchmarks/reproduce/hardening_cost.py --suite opinfo --dtypes f32,bf16 --device cpu \\
      --baseline-src /tmp/base/src --out benchmarks/results/hardening-cost-opinfo-cpu
  python benchmarks/reproduce/hardening_cost.py --suite traces --traces .gpu_data/traces \\
      --device cuda --limit-per-op 1 --baseline-src base/src --out ...

Committed results: ``benchmarks/results/hardening-cost-opinfo-cpu.json`` (first command
above, ``--out benchmarks/results/hardening-cost-opinfo-cpu``) and
``hardening-cost-traces-h100.json`` and ``hardening-cost-traces-h100-run2.json`` (the second,
on an H100, ``--out benchmarks/results/hardening-cost-traces-h100``, then ``...-run2``).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

KERNEL = '''"""Delegates to ATen: {op} (for measuring the judge's own cost)."""

import torch

_OP = torch.ops.aten.{base}.{overload}


def {folder}_kernel_impl(*args, **kwargs):
    return _OP(*args, **kwargs)
'''


def delegating_dir(ops: list[str], root: Path) -> Path:
    """One folder per overload whose kernel calls the overload itself."""
    sys.path.insert(0, str(REPO / "src"))
    from opbench.spec.ops import folder_name

    for op in sorted(set(ops)):
        base, _, overload = op.partition(".")
        folder = folder_name(op)
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / f"{folder}_implementation.py").write_text(
            KERNEL.format(op=op, base=base, overload=overload or "default", folder=folder)
        )
    return root


def suite_ops(args: argparse.Namespace) -> list[str]:
    """The overloads the suite selects (with the asked dtypes and limits), from a dry
    ``aten`` selection in this process."""
    sys.path.insert(0, str(REPO / "src"))
    from opbench.run.session import RunRequest, load_suite_cases, parse_dtypes, select_cases

    req = RunRequest(
        suite=args.suite,
        backend="aten",
        device=args.device,
        dtypes=parse_dtypes([args.dtypes] if args.dtypes else None),
        traces=args.traces,
        limit_per_op=args.limit_per_op,
        ops=args.ops.split(",") if args.ops else None,
    )
    return sorted({c.op for c in select_cases(req, load_suite_cases(req)).cases})


def run(src: Path, kernels: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "opbench.cli",
        "run",
        "--suite",
        args.suite,
        "--backend",
        str(kernels),
        "--device",
        args.device,
        "--allow-pytorch",
        "--no-perf",
        "--workers",
        str(args.workers),
        "--out",
        str(out),
    ]
    for flag, value in (
        ("--dtypes", args.dtypes),
        ("--traces", args.traces),
        ("--limit-per-op", args.limit_per_op),
        ("--ops", args.ops),
    ):
        if value:
            cmd += [flag, str(value)]
    env = dict(os.environ, PYTHONPATH=str(src))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    summary = (
        json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    )
    verdicts: dict[str, tuple[str, str | None]] = {}
    if (out / "results.sqlite").exists():
        con = sqlite3.connect(out / "results.sqlite")
        for tid, status, cat in con.execute("select test_id, status, category from results"):
            verdicts[tid] = (status, cat)
        con.close()
    return {
        "src": str(src),
        "rc": proc.returncode,
        "tail": (proc.stdout + proc.stderr)[-1200:] if proc.returncode else "",
        "wall_s": round(wall, 1),
        "timing_s": summary.get("timing_s"),
        "tests": summary.get("tests"),
        "correctness_score": summary.get("correctness_score"),
        "verdicts": verdicts,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="opinfo")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtypes", default=None)
    ap.add_argument("--traces", default=None)
    ap.add_argument("--limit-per-op", type=int, default=None)
    ap.add_argument("--ops", default=None)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--baseline-src", type=Path, default=None)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/opbench-hardening"))
    args = ap.parse_args()
    ops = suite_ops(args)
    kernels = delegating_dir(ops, args.scratch / "kernels")
    runs = {}
    for name, src in (("hardened", REPO / "src"), ("baseline", args.baseline_src)):
        if src is None:
            continue
        print(f"{name}: {len(ops)} overloads ...", flush=True)
        runs[name] = run(Path(src), kernels, args.scratch / f"run-{name}-{time.time_ns()}", args)
        print(f"  {runs[name]['wall_s']} s, tests {runs[name]['tests']}", flush=True)
    result: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "overloads": len(ops),
        "runs": {k: {kk: vv for kk, vv in v.items() if kk != "verdicts"} for k, v in runs.items()},
    }
    if "baseline" in runs:
        h, b = runs["hardened"], runs["baseline"]
        run_h = (h.get("timing_s") or {}).get("run") or h["wall_s"]
        run_b = (b.get("timing_s") or {}).get("run") or b["wall_s"]
        result["overhead_wall"] = round(h["wall_s"] / b["wall_s"] - 1, 4)
        result["overhead_run_phase"] = round(run_h / run_b - 1, 4)
        differ = {
            t: {"hardened": h["verdicts"].get(t), "baseline": v}
            for t, v in b["verdicts"].items()
            if h["verdicts"].get(t) != v
        }
        result["verdicts_differ"] = len(differ)
        result["differing"] = dict(list(differ.items())[:50])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps({k: v for k, v in result.items() if k != "differing"}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
