"""The zoo's four models trained eager and on a backend: step time with the host in it,
and the same step captured whole as a CUDA graph (device time only).

Runs ``opbench check-model --backend triton --device cuda --time-steps 10 --json ...``
over the zoo (``src/opbench/models/zoo.py``: bert, gpt2, resnet, encoder) twice, in its
own process each time: once as is, once with ``--cuda-graphs``; ``--policy RUN_DIR`` and
``--autocast bf16`` (mixed-precision training's forward) are passed to both. A backend slower per step but not per graph replay loses on its launch
path, not on its kernels. Writes ``benchmarks/results/check-model-<gpu>[-policy][-bf16].json``
and ``.md`` (and copies under ``$OUT``): per model the verdict, the share of ATen calls
served, eager and backend ms per step and per graph replay, both speedups, and why a side
could not be captured; the JSON keeps both runs' full ``check-model`` rows.

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/reproduce/check_models.py [--policy RUN_DIR] [--autocast bf16]
CPU smoke test (no graph run on a CPU; writes where ``--out-dir`` says):
    python3 benchmarks/reproduce/check_models.py --device cpu --time-steps 1 \
        --models encoder --out-dir /tmp/check-models
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks" / "common"))
from run_results import device_env, device_slug, write_result  # noqa: E402

#: Per ``check-model`` process: four models, float64 references and 2 x 12 timed steps
#: (and the graph captures) took well under this on an H100.
TIMEOUT_S = 1800


def check_model(args: argparse.Namespace, cuda_graphs: bool, json_out: Path) -> dict[str, Any]:
    """One ``opbench check-model`` process: its exit code, wall time, rows and tail."""
    cmd = [
        sys.executable, "-m", "opbench.cli", "check-model", "--backend", args.backend,
        "--device", args.device, "--models", args.models, "--time-steps", str(args.time_steps),
        "--no-ops", "--json", str(json_out),
    ]  # fmt: skip
    if args.policy:
        # a step captured as a graph pays no host cost: its policy is the run's device times
        cmd += ["--policy", args.policy, "--policy-measure", "device" if cuda_graphs else "host"]
    if cuda_graphs:
        cmd.append("--cuda-graphs")
    if args.autocast:
        cmd += ["--autocast", args.autocast]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        rc: int | str = p.returncode
        tail = (p.stdout + p.stderr)[-3000:]
    except subprocess.TimeoutExpired as e:
        rc, tail = "timeout", str(e.stdout or "")[-3000:]
    rows = json.loads(json_out.read_text()) if json_out.exists() else []
    return {
        "command": " ".join(["opbench", *cmd[3:]]).replace(str(json_out), "OUT.json"),
        "rc": rc,
        "wall_s": round(time.perf_counter() - t0, 1),
        "rows": rows,
        "tail": tail if rc != 0 else "",
    }


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}x"


def summary_rows(plain: dict[str, Any], graphs: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per model: the plain run's verdict and step times, the graph run's
    replay times and capture errors."""
    by_model = {r["model"]: r for r in (graphs or {}).get("rows", [])}
    out = []
    for r in plain["rows"]:
        g = by_model.get(r["model"], {})
        out.append(
            {
                "model": r["model"],
                "ok": r["ok"],
                "error": r["error"],
                "served_call_share": r["served_call_share"],
                "native_call_share": r.get("native_call_share"),
                "timed_native_share": r.get("timed_native_share"),
                "eager_step_ms": r["eager_step_ms"],
                "backend_step_ms": r["backend_step_ms"],
                "step_speedup": r["step_speedup"],
                "eager_graph_ms": g.get("eager_graph_ms"),
                "backend_graph_ms": g.get("backend_graph_ms"),
                "graph_speedup": g.get("graph_speedup"),
                "eager_graph_error": g.get("eager_graph_error"),
                "backend_graph_error": g.get("backend_graph_error"),
            }
        )
    return out


def markdown(env: dict[str, Any], rows: list[dict[str, Any]], runs: list[dict[str, Any]],
             autocast: str | None = None) -> list[str]:  # fmt: skip
    precision = (
        f"The forward and loss under `torch.autocast` to {autocast} (eager and backend alike)"
        if autocast
        else "Float32 throughout (IEEE matmuls and convolutions)"
    )
    md = [
        f"# check-model: the zoo eager and on the backend ({env['device']})",
        "",
        f"{env['date']}, torch {env['torch']}, triton {env['triton']}, `{env['command']}`",
        "",
        f"{precision}. Step: forward, loss, backward, SGD step, median of the timed steps, device "
        "synchronized. Graph: the same step captured whole as a CUDA graph, median replay "
        "(no host launch cost). Speedup: eager over backend (> 1: backend faster).",
        "",
        "From C++: the share of the step's ATen calls the C++ gate launched (natively or "
        "replayed), in the checked step (each call signature's first call) and over the "
        "last block of timed steps (replay serves a signature from its third or fourth "
        "call).",
        "",
        "| model | verdict | calls served | from C++, checked step | from C++, timed steps "
        "| eager ms/step | backend ms/step "
        "| step speedup | eager ms/graph | backend ms/graph | graph speedup |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        share, native = r["served_call_share"], r.get("native_call_share")
        timed = r.get("timed_native_share")
        md.append(
            f"| {r['model']} | {'ok' if r['ok'] else 'FAIL'} "
            f"| {'-' if share is None else f'{share:.0%}'} "
            f"| {'-' if native is None else f'{native:.0%}'} "
            f"| {'-' if timed is None else f'{timed:.0%}'} "
            f"| {_ms(r['eager_step_ms'])} | {_ms(r['backend_step_ms'])} | {_x(r['step_speedup'])} "
            f"| {_ms(r['eager_graph_ms'])} | {_ms(r['backend_graph_ms'])} "
            f"| {_x(r['graph_speedup'])} |"
        )
    notes = [
        f"- {r['model']} ({side}): {r[f'{side}_graph_error']}"
        for r in rows
        for side in ("eager", "backend")
        if r[f"{side}_graph_error"]
    ]
    notes += [f"- {r['model']}: {r['error']}" for r in rows if r["error"]]
    if notes:
        md += ["", "Not captured or not ok:", "", *notes]
    md += ["", "Runs:", ""]
    md += [f"- `{run['command']}`: exit {run['rc']}, {run['wall_s']} s" for run in runs]
    return md


def main() -> int:
    from opbench.models.zoo import MODEL_NAMES

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="triton")
    p.add_argument("--device", default="cuda")
    p.add_argument("--time-steps", type=int, default=10)
    p.add_argument("--models", default=",".join(MODEL_NAMES))
    p.add_argument("--policy", default=None, help="serve policy run directory, passed through")
    p.add_argument("--autocast", default=None, help="bf16 | f16: the forward under autocast, "
                   "passed through; the files are named -<autocast>")  # fmt: skip
    p.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per check-model")
    p.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    args = p.parse_args()

    cuda = args.device.startswith("cuda")
    with tempfile.TemporaryDirectory() as tmp:
        runs = [check_model(args, False, Path(tmp) / "plain.json")]
        if cuda:  # CUDA graphs need a CUDA device: the CPU smoke test skips them
            runs.append(check_model(args, True, Path(tmp) / "graphs.json"))
    for run in runs:
        if run["rc"] not in (0, 1) or not run["rows"]:  # 1: a model not ok, rows written
            print(f"{run['command']} failed (exit {run['rc']}):\n{run['tail']}", file=sys.stderr)
            return 1
    command = (
        f"python3 benchmarks/reproduce/check_models.py --backend {args.backend} --device "
        f"{args.device} --time-steps {args.time_steps} --models {args.models}"
        + (f" --policy {args.policy}" if args.policy else "")
        + (f" --autocast {args.autocast}" if args.autocast else "")
    )
    env = device_env(args.device, command)
    rows = summary_rows(runs[0], runs[1] if cuda else None)
    result = {"env": env, "models": rows, "runs": runs}
    stem = f"check-model-{device_slug(env['device'])}" + ("-policy" if args.policy else "")
    stem += f"-{args.autocast}" if args.autocast else ""
    md = markdown(env, rows, runs, args.autocast)
    write_result(Path(args.out_dir), stem, result, md)
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
