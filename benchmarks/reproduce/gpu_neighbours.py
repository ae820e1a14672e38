"""Neighbours that slow the reference, against their honest twins, timed on a device.

Judges ``tests/adversarial/neighbour_kernels`` (CPU-side neighbours: a thread started at
import through ``_thread``, one started at the first call, one started through
``ctypes``, a forked child, a spawned interpreter, a thread that runs only during
host-timed rounds) and, on CUDA, ``tests/adversarial/gpu_neighbour_kernels`` (a Triton
relu whose thread churns a 256 MiB buffer on its own stream while relu is not being
called), through the real ``opbench run`` path with timing on: once with every
static-scan rule allowed (only the runtime watch can catch them) and once with the
defaults. Then their honest twins (``honest_twins``, ``gpu_neighbour_twins``), which must
pass with their usual speedups. Writes ``neighbours-<device>.json`` and ``.md`` into
``--out-dir`` (and under ``$OUT`` when set).

Usage: python3 benchmarks/reproduce/gpu_neighbours.py [--device cuda] [--out-dir benchmarks/results]

Committed result: ``benchmarks/results/neighbours-h100.md`` and ``.json``:
    python3 benchmarks/reproduce/gpu_neighbours.py --device cuda
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
ADV = REPO / "tests" / "adversarial"

CPU_OPS = ("abs", "neg", "sin", "cos", "tanh", "sigmoid")
#: relu at a size where device time is well above the launch floor, and a small one
GPU_TRACE = """\
Operator: aten.relu.default
cnt: 2, ((T([4096, 4096], f32),), {})
cnt: 1, ((T([1024, 1024], f32),), {})
cnt: 1, ((T([64, 512], f32),), {})
"""


def _kernels(dest: Path, folders: list[Path]) -> Path:
    for folder in folders:
        for d in folder.iterdir():
            if d.is_dir() and not d.name.startswith("__"):
                shutil.copytree(d, dest / d.name, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _judge(work: Path, kernels: Path, device: str, allow: list[str]) -> list[dict[str, Any]]:
    from opbench.run.session import RunRequest, run
    from opbench.run.store import ResultStore

    trace = work / "trace.txt"
    lines = [
        f"Operator: aten.{op}.default\ncnt: 1, ((T([64, 64], f32),), {{}})\n" for op in CPU_OPS
    ]
    if device.startswith("cuda"):
        lines.append(GPU_TRACE)
    trace.write_text("".join(lines))
    out = work / "run"
    t0 = time.perf_counter()
    run(
        RunRequest(
            suite=f"traces:{trace}",
            backend=str(kernels),
            device=device,
            perf=True,
            out=out,
            sandbox="auto",
            allow_rules=allow,
            test_timeout_s=120.0,
        )
    )
    elapsed = time.perf_counter() - t0
    store = ResultStore(out / "results.sqlite")
    rows = [
        {
            "op": r.op,
            "args": r.args,
            "status": r.status,
            "category": r.category,
            "speedup": r.speedup,
            "speedup_host": r.speedup_host,
            "message": (r.message or "")[:400],
        }
        for r in store.results()
    ]
    store.close()
    print(f"  {len(rows)} tests in {elapsed:.1f} s", flush=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    args = p.parse_args()
    import torch

    from opbench.judge.static_scan import RULES

    gpu = args.device.startswith("cuda")
    tricks = [ADV / "neighbour_kernels"] + ([ADV / "gpu_neighbour_kernels"] if gpu else [])
    twins = [ADV / "honest_twins"] + ([ADV / "gpu_neighbour_twins"] if gpu else [])
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, folders, allow in (
            ("tricks, every rule allowed", tricks, sorted(RULES)),
            ("tricks, defaults", tricks, []),
            ("honest twins", twins, sorted(RULES)),
        ):
            print(name, flush=True)
            work = Path(tmp) / name.replace(" ", "_").replace(",", "")
            work.mkdir()
            runs[name] = _judge(work, _kernels(work / "kernels", folders), args.device, allow)
    failures: list[str] = []
    for name, rows in runs.items():
        for r in rows:
            if name.startswith("tricks") and (r["status"], r["category"]) != (
                "failed",
                "tampering",
            ):
                failures.append(f"{name}: {r['op']} {r['args']}: {r['status']}/{r['category']}")
            if name == "honest twins" and r["status"] != "passed":
                failures.append(f"{name}: {r['op']} {r['args']}: {r['status']}/{r['category']}")
    twin_by_op: dict[str, list[float]] = defaultdict(list)
    for r in runs["honest twins"]:
        if r["speedup"]:
            twin_by_op[r["op"]].append(r["speedup"])
    env = {
        "device": torch.cuda.get_device_name(0) if gpu else platform.processor() or "cpu",
        "torch": torch.__version__,
        "triton": _version("triton"),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
        "command": "python3 benchmarks/reproduce/gpu_neighbours.py --device " + args.device,
    }
    result = {"env": env, "runs": runs, "failures": failures, "ok": not failures}
    slug = "h100" if "H100" in env["device"] else ("h200" if "H200" in env["device"] else "cpu")
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"neighbours-{slug}.json").write_text(json.dumps(result, indent=1))
    md = [
        f"# Neighbours against their honest twins ({env['device']})",
        "",
        f"{env['date']}, torch {env['torch']}, Triton {env['triton']}, `{env['command']}`",
        "",
        "| run | op | args | verdict | device speedup | host speedup | message |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, rows in runs.items():
        for r in rows:
            sd = f"{r['speedup']:.3f}" if r["speedup"] else "-"
            sh = f"{r['speedup_host']:.3f}" if r["speedup_host"] else "-"
            msg = r["message"][:160].replace("|", "/").replace("\n", " ")
            md.append(
                f"| {name} | {r['op']} | `{r['args'][:40]}` | {r['status']}/{r['category'] or '-'} "
                f"| {sd} | {sh} | {msg} |"
            )
    md += ["", "Failures: " + ("none" if not failures else "; ".join(failures))]
    (out_dir / f"neighbours-{slug}.md").write_text("\n".join(md) + "\n")
    if os.environ.get("OUT") and Path(os.environ["OUT"]).resolve() != out_dir.resolve():
        for ext in ("json", "md"):
            shutil.copy(out_dir / f"neighbours-{slug}.{ext}", Path(os.environ["OUT"]))
    print("\n".join(md[-3:]))
    return 0 if not failures else 1


def _version(mod: str) -> str | None:
    try:
        return __import__(mod).__version__
    except Exception:  # noqa: BLE001
        return None


if __name__ == "__main__":
    sys.exit(main())
