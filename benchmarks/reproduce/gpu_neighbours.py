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
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))
ADV = REPO / "tests" / "adversarial"
sys.path.insert(0, str(REPO / "benchmarks" / "common"))
from run_results import device_env, device_slug, stored_rows, write_result  # noqa: E402

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
    rows = stored_rows(
        out, ("op", "args", "status", "category", "speedup", "speedup_host", "message")
    )
    print(f"  {len(rows)} tests in {elapsed:.1f} s", flush=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    args = p.parse_args()

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
    env = device_env(
        args.device, "python3 benchmarks/reproduce/gpu_neighbours.py --device " + args.device
    )
    result = {"env": env, "runs": runs, "failures": failures, "ok": not failures}
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
    write_result(Path(args.out_dir), f"neighbours-{device_slug(env['device'])}", result, md)
    print("\n".join(md[-3:]))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
