"""The traces suite on the GPUs of one machine: one worker against one per GPU, and a
timing run.

Runs ``opbench run --suite traces --backend aten --device cuda --limit-per-op 1`` as a
correctness pass (``--no-perf``) with ``--workers 1`` and with ``--workers N`` (N = the
number of visible GPUs, one worker each), then the timing pass (``--perf``) with N
workers, each in its own run directory. Writes ``benchmarks/results/traces-<gpu>x<N>.json``
and ``.md`` (and copies under ``$OUT``) with wall times, speedup of N workers over one,
scores, and the timing pass's coverage (ops with both times, a spread, canary flags and a
roofline fraction).

Usage: python benchmarks/reproduce/gpu_workers.py --traces .gpu_data/traces [--budget 170]

Committed results: ``benchmarks/results/traces-h200x2.md``/``.json`` (2 x H200),
``traces-h200x2-compare.md``/``.json`` (``--no-timing-pass``) and
``traces-h100x1-compare-ray.md``/``.json`` (``--ray``, 1 x H100) and
``traces-h200x2-compare-ray.md``/``.json`` (2 x H200, 2026-11-27, every included op
of the suite: ``--no-timing-pass --skip-one --ray --budget 160``):
    python benchmarks/reproduce/gpu_workers.py --traces .gpu_data/traces [--no-timing-pass] [--ray]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def device_loads(con: sqlite3.Connection) -> dict[str, dict[str, float]]:
    """Per device (one slot a GPU): its tests, its workers' seconds, and when its last
    result landed, in seconds after the run's first. Slots whose last results land far
    apart show work cut unevenly (chunks of 32 gave one of 4 slots 64 of 166 tests,
    2026-11-27)."""
    rows = con.execute("select device, duration_s, finished_at from results").fetchall()
    if not rows:
        return {}
    start = min(r[2] or 0.0 for r in rows)
    out: dict[str, dict[str, float]] = {}
    for device, duration, finished in rows:
        d = out.setdefault(device or "?", {"tests": 0, "worker_s": 0.0, "last_result_s": 0.0})
        d["tests"] += 1
        d["worker_s"] = round(d["worker_s"] + (duration or 0.0), 1)
        d["last_result_s"] = round(max(d["last_result_s"], (finished or start) - start), 1)
    return dict(sorted(out.items()))


def run(
    args: list[str],
    out: Path,
    budget_s: float,
    env: dict[str, str] | None = None,
    profile: Path | None = None,
    profile_mode: str = "threads",
) -> dict[str, Any]:
    """``opbench run ARGS --out OUT`` within ``budget_s`` (``env``: the variables set on
    top of this process's); its summary, verdicts and timing coverage. ``profile``: run it
    under ``py-spy record --threads`` (25 samples a second), its raw stacks written there
    (``benchmarks/probes/pyspy_summary.py`` reads them); ``profile_mode`` ``threads``: the
    harness's threads while on a CPU, ``gil``: only the thread holding the harness's GIL
    (its sum against the wall says whether one interpreter sets the pace), ``processes``:
    the harness and every process under it (workers and their fork servers).

    ``out`` is this benchmark's scratch directory, emptied first unless ``args`` resume
    it: a run left there by an earlier call (the same name under another ``--env``) made
    opbench refuse in 4 s ("already holds 166 results"), and that refusal was reported as
    the run (a 4 x H100 host, 2026-11-27)."""
    if "--resume" not in args:
        shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "opbench.cli", "run", *args, "--out", str(out)]
    if profile is not None:
        mode = {"threads": [], "gil": ["--gil"], "processes": ["--subprocesses"]}[profile_mode]
        cmd = [_py_spy(), "record", "-r", "25", "--threads", *mode, "-f", "raw",
               "-o", str(profile), "--", *cmd]  # fmt: skip
    t0 = time.perf_counter()
    # a session of its own: a run out of time is killed with every process under it,
    # whose inherited stdout would otherwise keep communicate() waiting (2026-11-28)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, **(env or {})}, start_new_session=True,
    )  # fmt: skip
    try:
        text, _ = proc.communicate(timeout=budget_s)
        rc: Any = proc.returncode
        stack = None
    except subprocess.TimeoutExpired:  # where it was: its stack, then its last output
        stack = stack_dump(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            text, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            text = ""
        rc = "timeout"
    tail = (text or "")[-1500:]
    wall = time.perf_counter() - t0
    res: dict[str, Any] = {"command": "opbench run " + " ".join(args), "rc": rc, "wall_s": wall}
    summary = out / "summary.json"
    if summary.exists():
        s = json.loads(summary.read_text())
        res.update(
            {
                k: s.get(k)
                for k in (
                    "correctness_score",
                    "performance_score",
                    "performance_score_host",
                    "ops_in_denominator",
                    "tests",
                    "timing_s",
                    "coverage",
                    "not_tested",
                    "env",
                )
            }
        )
    db = out / "results.sqlite"
    if db.exists():
        con = sqlite3.connect(db)
        res["tests_recorded"] = con.execute("select count(*) from results").fetchone()[0]
        spent = con.execute("select duration_s, details from results").fetchall()
        res["worker_s_total"] = round(sum(r[0] or 0 for r in spent), 1)
        res["judge_s_total"] = round(
            sum(json.loads(r[1] or "{}").get("judge_s", 0.0) for r in spent), 1
        )
        res["by_device"] = device_loads(con)
        res["verdicts"] = {
            t: f"{st}/{cat or '-'}"
            for t, st, cat in con.execute("select test_id, status, category from results")
        }
        res["not_passed"] = [
            {"op": r[0], "status": r[1], "category": r[2], "message": (r[3] or "")[:600]}
            for r in con.execute(
                "select op, status, category, message from results where status != 'passed'"
            )
        ]
        rows = con.execute(
            "select op, speedup, speedup_host, spread, flags, details from results "
            "where status = 'passed'"
        ).fetchall()
        con.close()
        timed = [r for r in rows if r[1] is not None and r[2] is not None and r[3] is not None]
        with_roofline = [r for r in timed if '"roofline"' in (r[5] or "")]
        res["timed_ops"] = len({r[0] for r in timed})
        res["timed_ops_with_roofline"] = len({r[0] for r in with_roofline})
        flags: dict[str, int] = {}
        for r in timed:
            for f in json.loads(r[4] or "[]"):
                flags[f] = flags.get(f, 0) + 1
        res["flag_counts"] = flags
    if rc != 0:
        res["output_tail"] = tail
    if stack:
        res["stack_at_timeout"] = stack
    return res


def _py_spy() -> str:
    """py-spy, where it is installed (carry its wheel to a GPU machine: gpu_env.sh)."""
    return shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))


def stack_dump(pid: int) -> str | None:
    """The Python stacks of a run that ran out of time (``py-spy dump``, where py-spy is
    installed: carry its wheel to a GPU machine), so a timed-out run says where it was."""
    try:
        out = subprocess.run([_py_spy(), "dump", "--subprocesses", "--pid", str(pid)], capture_output=True, text=True,
                             timeout=30)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"no stack: {e}"
    return (out.stdout + out.stderr)[-6000:]


def write_results(out_dir: Path, stem: str, result: dict[str, Any], lines: list[str]) -> None:
    """``STEM.json`` and ``STEM.md`` in ``out_dir`` and, on a lent GPU machine, in ``$OUT``
    (what comes back from it); the markdown is printed too."""
    for d in [out_dir] + ([Path(os.environ["OUT"])] if os.environ.get("OUT") else []):
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{stem}.json").write_text(json.dumps(result, indent=1, default=str))
        (d / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", required=True)
    p.add_argument("--budget", type=float, default=170.0, help="seconds per pass")
    p.add_argument("--workdir", default="/tmp/opbench-workers")
    p.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--device", default="cuda", help="cuda; cpu only to smoke-test this script")
    p.add_argument("--workers", type=int, default=None, help="default: the number of GPUs")
    p.add_argument(
        "--compare-ops",
        type=int,
        default=None,
        help="run the 1-vs-N comparison on every k-th included op, this many in all",
    )
    p.add_argument("--timing-budget", type=float, default=None, help="seconds, timing pass")
    p.add_argument("--no-timing-pass", action="store_true", help="only the 1-vs-N comparison")
    p.add_argument(
        "--ray",
        action="store_true",
        help="also run the correctness pass with --executor ray and compare its verdicts",
    )
    p.add_argument("--skip-one", action="store_true", help="no 1-worker pass")
    ns = p.parse_args()
    import torch

    cuda = ns.device == "cuda"
    n = ns.workers or (torch.cuda.device_count() if cuda else 2)
    gpu = torch.cuda.get_device_name(0) if cuda else "cpu"
    slug = "h200" if "H200" in gpu else "h100" if "H100" in gpu else "gpu"
    base = ["--suite", "traces", "--traces", ns.traces, "--backend", "aten"]
    base += ["--device", ns.device, "--limit-per-op", "1"]
    wd = Path(ns.workdir)
    cmp_args = list(base)
    if ns.compare_ops:
        sys.path.insert(0, str(REPO / "src"))
        from opbench.suites.traces import build_trace_cases

        ops = sorted({c.op for c in build_trace_cases(ns.traces, device=ns.device) if c.included})
        step = max(1, len(ops) // ns.compare_ops)
        cmp_args += ["--ops", ",".join(ops[::step][: ns.compare_ops])]
    passes = {}
    if not ns.skip_one:
        passes["correctness_1_worker"] = run(
            [*cmp_args, "--no-perf", "--workers", "1"], wd / "c1", ns.budget
        )
    passes[f"correctness_{n}_workers"] = run(
        [*cmp_args, "--no-perf", "--workers", str(n)], wd / f"c{n}", ns.budget
    )
    if ns.ray:
        passes["correctness_ray"] = run(
            [*cmp_args, "--no-perf", "--executor", "ray"], wd / "ray", ns.budget
        )
    if not ns.no_timing_pass:
        passes[f"timing_{n}_workers"] = run(
            [*base, "--perf", "--workers", str(n)], wd / f"t{n}", ns.timing_budget or ns.budget
        )
    one = passes.get("correctness_1_worker", {})
    many = passes[f"correctness_{n}_workers"]
    result = {
        "gpu": gpu,
        "gpus": n,
        "passes": passes,
        "speedup_workers": (one["wall_s"] / many["wall_s"])
        if one.get("rc") == 0 and many.get("rc") == 0
        else None,
    }
    if ns.ray:
        ray_v = passes["correctness_ray"].get("verdicts") or {}
        many_v = many.get("verdicts") or {}
        result["ray_vs_workers"] = {
            "tests": len(ray_v),
            "same_verdicts": sum(ray_v.get(t) == v for t, v in many_v.items()),
            "differ": {t: [v, ray_v.get(t)] for t, v in many_v.items() if ray_v.get(t) != v},
        }
    lines = [
        f"# traces suite on {n} x {gpu}",
        "",
        "| pass | rc | wall s | worker s | judge s | tests | correctness | perf (device) | perf (host) | timed ops | with roofline |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in passes.items():
        lines.append(
            f"| {name} | {r['rc']} | {r['wall_s']:.1f} | {r.get('worker_s_total')} | "
            f"{r.get('judge_s_total')} | {r.get('tests_recorded')} | "
            f"{r.get('correctness_score')} | {r.get('performance_score')} | "
            f"{r.get('performance_score_host')} | {r.get('timed_ops', '-')} | "
            f"{r.get('timed_ops_with_roofline', '-')} |"
        )
    lines += ["", f"{n} workers over 1: {result['speedup_workers']}", ""]
    if "ray_vs_workers" in result:
        rv = result["ray_vs_workers"]
        lines += [
            f"--executor ray against --workers {n}: {rv['same_verdicts']} of "
            f"{len(many.get('verdicts') or {})} tests with the same verdict; differing: "
            f"{rv['differ'] or 'none'}",
            "",
        ]
    for name, r in passes.items():
        for f in r.get("not_passed") or []:
            msg = f["message"].splitlines()[0][:200] if f["message"] else ""
            lines.append(f"- {name}: {f['op']} {f['status']} ({f['category']}): {msg}")
    lines.append("")
    lines += [f"- `{r['command'][:300]}`" for r in passes.values()]
    stem = f"traces-{slug}x{n}" + ("-compare" if ns.no_timing_pass else "")
    stem += "-ray" if ns.ray else ""
    write_results(Path(ns.out_dir), stem, result, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
