"""Serve-only-where-it-wins on calls it was not judged on: each of check-model's four
models trained on the backend with a policy built from the other models' calls only.

The committed zoo policy (``check-model-h100-policy.md``) was judged on the very calls the
models make, so its step times are in-sample. Here, for each model, the judged run of the
zoo's calls (``RUN_DIR``: ``opbench run --suite traces --traces zoo-trace.txt``) loses
every row only that model calls (its own trace, ``zoo_step.py`` on that model alone);
rows the model shares with another model stay, as a policy learnt on other models would
see them. ``check-model`` then times the model on that policy: plain steps with the host
verdicts, the whole step as a CUDA graph with the device verdicts.

Usage (GPU machine): python3 benchmarks/reproduce/zoo_heldout_policy.py RUN_DIR [--out FILE.json]
Writes the JSON (device, versions, command, rows) and FILE.md. Not yet run on a GPU
(written 2026-11-27 when the session's device time was spent; its trace parsing and
row removal were checked on the committed H100 run's results: all 358 rows map to trace
lines of ``benchmarks/results/zoo-trace-h100.txt``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import triton

REPO = Path(__file__).resolve().parents[2]
MODELS = ("bert", "gpt2", "resnet", "encoder")


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "opbench.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def rows_of(trace: Path) -> set[tuple[str, str]]:
    """``(op, args)`` of every line of a trace file, as a run's results name them."""
    rows, op = set(), None
    for line in trace.read_text().splitlines():
        if line.startswith("Operator: "):
            op = line.removeprefix("Operator: ").removeprefix("aten.").strip()
        elif line.startswith("cnt: ") and op:
            rows.add((op, line.split(", ", 1)[1]))
    return rows


def without(run: Path, drop: set[tuple[str, str]], out: Path) -> int:
    """A copy of ``run``'s results without the ``drop`` rows; how many went."""
    out.mkdir(parents=True)
    shutil.copy(run / "results.sqlite", out / "results.sqlite")
    con = sqlite3.connect(out / "results.sqlite")
    gone = 0
    for op, args in drop:
        gone += con.execute("DELETE FROM results WHERE op = ? AND args = ?", (op, args)).rowcount
    con.commit()
    con.close()
    return gone


def step(model: str, policy: Path, graphs: bool, tmp: Path) -> dict[str, Any]:
    out = tmp / f"{model}-{'graph' if graphs else 'step'}.json"
    args = ["check-model", "--backend", "triton", "--device", "cuda", "--models", model,
            "--time-steps", "10", "--no-ops", "--json", str(out), "--policy", str(policy),
            "--policy-measure", "device" if graphs else "host"]  # fmt: skip
    p = _cli(*args, *(["--cuda-graphs"] if graphs else []))
    if p.returncode != 0 or not out.exists():
        return {"error": (p.stdout + p.stderr)[-400:]}
    return json.loads(out.read_text())[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a judged run of the zoo's calls")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    t0 = time.time()
    tmp = Path(tempfile.mkdtemp(prefix="zoo-heldout-"))
    own = {}
    for m in MODELS:
        trace = tmp / f"{m}.txt"
        _cli(
            "trace",
            str(REPO / "benchmarks/reproduce/zoo_step.py"),
            "-o",
            str(trace),
            "--",
            "cuda",
            m,
        )
        own[m] = rows_of(trace)
    rows = []
    for m in MODELS:
        others = set().union(*(own[o] for o in MODELS if o != m))
        held = own[m] - others
        policy_dir = tmp / f"policy-without-{m}"
        gone = without(a.run, held, policy_dir)
        plain, graph = step(m, policy_dir, False, tmp), step(m, policy_dir, True, tmp)
        row = {
            "model": m, "rows_only_this_model_calls": len(held), "results_removed": gone,
            "ok": plain.get("ok"), "error": plain.get("error") or graph.get("error"),
            "step_speedup": plain.get("step_speedup"), "graph_speedup": graph.get("graph_speedup"),
            "eager_step_ms": plain.get("eager_step_ms"), "backend_step_ms": plain.get("backend_step_ms"),
            "native_call_share": plain.get("native_call_share"),
        }  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "triton": triton.__version__, "date": time.strftime("%Y-%m-%d"),
        "command": "python3 benchmarks/reproduce/zoo_heldout_policy.py RUN_DIR",
        "run": str(a.run), "seconds": round(time.time() - t0, 1), "rows": rows,
    }  # fmt: skip
    lines = [
        "| model | rows only it calls (left out) | step speedup | graph speedup | calls from C++ |",
        "| --- | --- | --- | --- | --- |",
    ]
    fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['rows_only_this_model_calls']} | {fmt(r['step_speedup'], '.3f')}x "
            f"| {fmt(r['graph_speedup'], '.3f')}x | {fmt(r['native_call_share'], '.0%')} |"
        )
    table = "\n".join(lines)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=1) + "\n")
        a.out.with_suffix(".md").write_text(
            f"# The zoo on a policy that left each model's own calls out ({result['device']})\n\n"
            f"{result['date']}, torch {result['torch']}, triton {result['triton']}, "
            f"`{result['command']}`\n\n" + (__doc__.split("\n\n")[1]) + "\n\n" + table + "\n"
        )
    print(table)


if __name__ == "__main__":
    main()
