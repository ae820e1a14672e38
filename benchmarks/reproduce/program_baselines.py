"""Eager and ``torch.compile`` baselines of program problems on a GPU, timed by opbench's
protocol, and compared with KernelBench's published H100 times.

For every problem of a suite (our own set, or KernelBench's levels 1-3) one child process
builds ``Model`` with random weights, compiles it (Inductor, default mode), and times
eager against compiled with :func:`opbench.instrument.timing.time_pair` (interleaved, L2
flushed, medians of device time; host-inclusive time beside). It also times both the way
KernelBench did (3 warm-ups, then the mean of 100 calls each timed by CUDA events,
nothing flushed), so a difference from the published times can be split, by measurement,
into the protocol's part (ours against KernelBench-style, here) and the rest (PyTorch 2.11
against 2.5, another H100, another driver: KernelBench-style here against published).

Models run as built, in training mode, under ``no_grad``, as KernelBench's baseline script
and opbench's judge run them; journal rows an earlier version timed after ``.eval()`` are
timed again where eval mode changes the computation (``loader.mode_dependent``), and the
report marks those still in the journal.

Compiling costs 10-60 s a problem and is CPU work: ``--jobs`` children compile at once,
and a file lock lets one child time at a time (the others' compiles share the CPU, not the
GPU's timed work, but a neighbour's first compiled call may land in a timed sample: the
medians absorb it). Problems whose inputs, weights and outputs exceed ``--big-bytes`` run
after the others, one at a time. Every finished problem is appended to ``--journal`` at
once; a rerun skips what is there (device calls are cut off at 10 minutes).

Usage (on the GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/reproduce/program_baselines.py --suite own --levels 1,2,3 \\
        --journal .gpu_data/runs/bl-own.jsonl --budget 500
    python3 benchmarks/reproduce/program_baselines.py --suite .gpu_data/kernelbench --levels 1 \\
        --journal .gpu_data/runs/bl-kb.jsonl --budget 500
    # on a fresh machine, go on from the committed result (only what is missing or stale runs)
    python3 benchmarks/reproduce/program_baselines.py --suite .gpu_data/kernelbench --levels 1,2,3 \\
        --journal .gpu_data/runs/bl-kb.jsonl --big-jobs 2 \\
        --resume-from benchmarks/results/program-baselines-kernelbench-h100.json
    python3 benchmarks/reproduce/program_baselines.py --report --journal .gpu_data/runs/bl-kb.jsonl \\
        --suite .gpu_data/kernelbench \\
        --published .gpu_data/kernelbench/baseline_timing/H100_Modal \\
        --out benchmarks/results/program-baselines-kernelbench-h100

Committed results: ``benchmarks/results/program-baselines-own-h100.md``/``.json`` (``--suite
own``, then ``--report --out benchmarks/results/program-baselines-own-h100``) and
``program-baselines-kernelbench-h100.md``/``.json`` (the KernelBench commands above).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from opbench.report.means import geomean_of_timed

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))

#: A ratio outside [1/TOLERANCE, TOLERANCE] of the published time gets a reason.
TOLERANCE = 1.2
KB_WARMUP, KB_TRIALS = 3, 100


# ---------------------------------------------------------------- child: one problem


def _kb_style_ms(fn: Any, args: list[Any], device: str, budget_s: float = 3.0) -> dict[str, Any]:
    """KernelBench's protocol: 3 warm-ups, then each of up to 100 calls timed alone by
    CUDA events (synchronised after each; wall clock on the CPU), their mean and std; no
    L2 flush. Calls stop after ``budget_s`` (``trials`` says how many ran): a problem of
    100 ms would otherwise hold the GPU's timing lock for 20 s, and KernelBench's 250
    problems could not be timed within a session's device time."""
    import torch

    from opbench.instrument.tensors import sync

    cuda = device.startswith("cuda")
    for _ in range(KB_WARMUP):
        fn(*args)
    sync(device)
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < KB_TRIALS and time.perf_counter() < deadline:
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*args)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn(*args)
            times.append((time.perf_counter() - t0) * 1e3)
    mean = sum(times) / len(times)
    std = math.sqrt(sum((t - mean) ** 2 for t in times) / max(1, len(times) - 1))
    return {"mean": mean, "std": std, "trials": len(times)}


def child(problem: str, size: str | None, device: str, lock_path: str) -> dict[str, Any]:
    """Build, compile and time one problem; never raises (errors become fields)."""
    import torch

    from opbench.instrument import timing
    from opbench.instrument.tensors import sync
    from opbench.programs import loader
    from opbench.programs.inputs import build_model, call_sized, make_inputs

    out: dict[str, Any] = {"status": "ok"}
    stage = "load"
    try:
        mod = loader.load_module(Path(problem))
        stage = "build"
        init = list(call_sized(mod.get_init_inputs, size))
        # training mode, as built: KernelBench's timings and opbench's judge both run it so
        out["mode"] = "train"
        out["mode_dependent"] = loader.mode_dependent(mod, size)
        model = build_model(mod.Model, init, 0, device)
        args = make_inputs(mod, 1, size, device)

        def eager(*a: Any) -> Any:
            with torch.no_grad():
                return model(*a)

        stage = "eager"
        eager(*args)
        sync(device)
        stage = "compile"
        compiled_model = torch.compile(model)

        def compiled(*a: Any) -> Any:
            with torch.no_grad():
                return compiled_model(*a)

        t0 = time.perf_counter()
        compiled(*args)
        sync(device)
        out["compile_s"] = round(time.perf_counter() - t0, 2)
        stage = "time"
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                pair = timing.time_pair(eager, compiled, lambda: (args, {}), device)
                out["kb_style_eager"] = _kb_style_ms(eager, args, device)
                out["kb_style_compile"] = _kb_style_ms(compiled, args, device)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        out.update(
            eager_ms=pair.ref_device_ms,
            compile_ms=pair.cand_device_ms,
            eager_host_ms=pair.ref_host_ms,
            compile_host_ms=pair.cand_host_ms,
            compile_speedup=pair.speedup_device,
            speedup_rel_err=pair.speedup_rel_err,
            flags=pair.flags,
        )
    except torch.cuda.OutOfMemoryError as e:
        out.update(status="oom", stage=stage, error=str(e).splitlines()[0][:300])
    except Exception as e:
        out.update(status="error", stage=stage, error=f"{type(e).__name__}: {e}"[:500])
    return out


# ---------------------------------------------------------------- parent: the schedule


def _done(journal: Path) -> dict[str, dict[str, Any]]:
    from opbench.run.journal import read_records

    try:
        return read_records(journal, "baselines journal", lambda r: r["id"])
    except ValueError as e:
        raise SystemExit(str(e)) from None


def _mode_dependent(path: Path, size: str | None) -> list[str] | None:
    """The problem's classes that behave differently in eval mode; None when it cannot be
    built here (a missing package)."""
    from opbench.programs import loader

    try:
        return loader.mode_dependent(loader.load_module(path), size)
    except Exception:
        return None


def _timed_in_eval_mode(row: dict[str, Any], problem: Any, size: str | None) -> bool:
    """Whether a journaled row was timed after ``.eval()`` (rows before the ``mode`` field)
    on a problem whose computation that changes, so its times are not the problem's."""
    if row.get("mode") == "train" or row["status"] != "ok":
        return False
    return bool(_mode_dependent(problem.path, size))


def _estimate(path: Path, size: str | None) -> tuple[int | None, str | None]:
    from opbench.programs import loader

    try:
        total, _, _ = loader.estimate_bytes(loader.load_module(path), size)
        return total, None
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"[:300]


def run_suite(args: argparse.Namespace) -> None:
    from opbench.programs import loader
    from opbench.run.bounded import run_bounded

    root = loader.OWN_PROBLEMS if args.suite == "own" else Path(args.suite)
    levels = args.levels.split(",") if args.levels else None
    problems = loader.discover(root, levels=levels)
    size = args.size if args.suite == "own" else None
    journal = Path(args.journal)
    journal.parent.mkdir(parents=True, exist_ok=True)
    retry = set(args.retry.split(",")) if args.retry else set()
    done = {k: r for k, r in _done(journal).items() if r["status"] not in retry}
    by_id = {p.problem_id: p for p in problems}
    stale = [k for k, r in done.items() if k in by_id and _timed_in_eval_mode(r, by_id[k], size)]
    for k in stale:
        del done[k]
    if stale:
        print(f"{len(stale)} journaled rows were timed in eval mode: timing them again", flush=True)
    todo = [p for p in problems if p.problem_id not in done]
    print(f"{len(problems)} problems, {len(problems) - len(todo)} in {journal}", flush=True)
    write = threading.Lock()
    started = time.monotonic()
    lock_path = args.lock or str(journal) + ".lock"
    threads = max(1, (os.cpu_count() or 2) // max(1, args.jobs))

    from opbench.run.journal import append_record

    def record(problem: Any, row: dict[str, Any]) -> None:
        row = {"id": problem.problem_id, "level": problem.level, "file": problem.path.name, **row}
        with write:
            append_record(journal, row)
            ok = row["status"] == "ok"
            what = (
                f"eager {row['eager_ms']:.3f} ms, compiled {row['compile_ms']:.3f} ms"
                if ok
                else f"{row['status']}: {row.get('error', '')[:120]}"
            )
            print(f"[{time.monotonic() - started:5.0f}s] {problem.problem_id}: {what}", flush=True)

    def one(problem: Any, nbytes: int | None) -> None:
        if time.monotonic() - started > args.budget:
            return
        env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS=str(threads))
        cmd = [sys.executable, __file__, "--child", str(problem.path), "--device", args.device]
        cmd += ["--lock", lock_path] + (["--size", size] if size else [])
        t0 = time.monotonic()
        try:
            p = run_bounded(cmd, timeout=args.timeout, env=env)
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            row = (
                json.loads(lines[-1])
                if lines
                else {"status": "crashed", "error": f"exit {p.returncode}: {p.stderr[-300:]}"}
            )
        except subprocess.TimeoutExpired:
            row = {"status": "timeout", "error": f"over {args.timeout} s"}
        row.update(bytes=nbytes, wall_s=round(time.monotonic() - t0, 1))
        record(problem, row)

    small, big = [], []
    for p in todo:
        nbytes, err = _estimate(p.path, size)
        if err is not None:
            record(p, {"status": "not_runnable", "error": err, "bytes": None})
        elif nbytes > args.max_bytes:
            reason = f"too large: {nbytes / 2**30:.1f} GiB > {args.max_bytes / 2**30:.1f} GiB"
            record(p, {"status": "not_runnable", "error": reason, "bytes": nbytes})
        else:
            (big if nbytes > args.big_bytes else small).append((p, nbytes))
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda pn: one(*pn), small))
    # big ones after the rest, --big-jobs at once (each holds several copies of its inputs)
    with ThreadPoolExecutor(args.big_jobs) as pool:
        list(pool.map(lambda pn: one(*pn), big))
    left = len([p for p in problems if p.problem_id not in _done(journal)])
    print(f"{left} problems left after {time.monotonic() - started:.0f} s", flush=True)


# ---------------------------------------------------------------- the report


def _published(folder: Path | None) -> dict[str, dict[str, float]]:
    """``{"level1/1_Square...": {"eager": ms, "compile": ms}}`` from KernelBench's files."""
    if folder is None:
        return {}
    out: dict[str, dict[str, float]] = {}
    for key, name in (
        ("eager", "baseline_time_torch.json"),
        ("compile", "baseline_time_torch_compile_inductor_default.json"),
    ):
        data = json.loads((folder / name).read_text())
        for level, files in data.items():
            for file, stats in files.items():
                out.setdefault(f"{level}/{Path(file).stem}", {})[key] = stats["mean"]
    return out


def _reason(ours: float, kb_here: float, published: float) -> str:
    """Why ours differs from the published time by more than TOLERANCE, from the two
    measured factors: the protocol (ours / KB-style here) and the rest (KB-style here /
    published: torch 2.11 against 2.5, the machine)."""
    proto, rest = ours / kb_here, kb_here / published
    parts = []
    if not 1 / TOLERANCE <= proto <= TOLERANCE:
        parts.append(
            f"protocol x{proto:.2f} (median device time, L2 flushed, vs mean of event-timed calls)"
        )
    if not 1 / TOLERANCE <= rest <= TOLERANCE:
        parts.append(f"version/machine x{rest:.2f} (same KB protocol here vs published)")
    return "; ".join(parts) or f"both factors within 20% (protocol x{proto:.2f}, rest x{rest:.2f})"


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "" if x is None else format(x, spec)


def report(args: argparse.Namespace) -> None:
    from opbench.programs import loader

    rows = list(_done(Path(args.journal)).values())
    root = loader.OWN_PROBLEMS if args.suite == "own" else Path(args.suite)
    size = args.size if args.suite == "own" else None
    published = _published(Path(args.published) if args.published else None)
    env_path = Path(args.journal).with_suffix(".env.json")
    env = json.loads(env_path.read_text()) if env_path.exists() else {}
    lines = [
        f"# Program baselines: {args.title or Path(args.out).name}",
        "",
        f"Device: {env.get('gpu')}; torch {env.get('torch')}, Triton {env.get('triton')}, "
        f"CUDA {env.get('cuda')}, driver {env.get('driver')}. Commands (one per GPU call): "
        + "; ".join(f"`{c}`" for c in env.get("commands") or [env.get("command", "")])
        + ".",
        "",
        "`eager`/`compiled`: median device time (ms) by opbench's protocol (interleaved, L2 "
        "flushed); `x`: compiled speedup over eager. `KB-style`: KernelBench's own protocol "
        "here (3 warm-ups, mean of 100 event-timed calls). `pub`: KernelBench's published "
        "H100 mean (PyTorch 2.5); `ratio`: ours / pub, explained where off by more than 20%. "
        "Models run as built, in training mode, as KernelBench and opbench's judge run them "
        "(batch norm uses batch statistics, dropout draws); rows timed after `.eval()` by an "
        "earlier version of this script are marked and left out of the summary's counts.",
        "",
    ]
    head = "| problem | eager | compiled | x | KB-style eager | pub eager | ratio | pub compiled | ratio | why (eager; compiled) |"
    lines += [head, "|" + " --- |" * (head.count(" | ") + 1)]
    summary: dict[str, Any] = {
        "problems": 0,
        "ok": 0,
        "timed_in_eval_mode": 0,
        "within_20pct_eager": 0,
        "compared": 0,
    }
    for row in sorted(rows, key=lambda r: (r["level"], _num(r["file"]), r["id"])):
        summary["problems"] += 1
        if row["status"] != "ok":
            lines.append(f"| {row['id']} | {row['status']}: {row.get('error', '')[:80]} |||||||||")
            continue
        summary["ok"] += 1
        pub = published.get(row["id"], {})
        why, ratios = [], []
        if "mode" not in row:  # timed before the mode was recorded: after .eval()
            dependent = _mode_dependent(root / row["id"].split("/")[0] / row["file"], size)
            row["mode"] = "eval" if dependent else "train"
            row["mode_dependent"] = dependent
        if row["mode"] == "eval":
            summary["timed_in_eval_mode"] += 1
            why.append(
                f"timed in eval mode ({', '.join(row['mode_dependent'])}): not the computation "
                "KernelBench and the judge time (training mode); to be timed again"
            )
        for side in ("eager", "compile"):
            ours, kb = row[f"{side}_ms"], row[f"kb_style_{side}"]["mean"]
            p = pub.get(side)
            r = ours / p if p else None
            ratios.append(r)
            row[f"pub_{side}_ms"], row[f"ratio_{side}"] = p, r
            if r is not None and not 1 / TOLERANCE <= r <= TOLERANCE:
                row[f"why_{side}"] = _reason(ours, kb, p)
                why.append(f"{side}: {row[f'why_{side}']}")
        if ratios[0] is not None and row["mode"] == "train":
            summary["compared"] += 1
            summary["within_20pct_eager"] += 1 / TOLERANCE <= ratios[0] <= TOLERANCE
        lines.append(
            f"| {row['id']} | {row['eager_ms']:.3f} | {row['compile_ms']:.3f} | "
            f"{row['compile_speedup']:.2f} | {row['kb_style_eager']['mean']:.3f} | "
            f"{_fmt(pub.get('eager'))} | {_fmt(ratios[0], '.2f')} | {_fmt(pub.get('compile'))} | "
            f"{_fmt(ratios[1], '.2f')} | {'; '.join(why)} |"
        )
    # rows timed in eval mode computed something else: kept in the table, not in the scores
    ok = [r for r in rows if r["status"] == "ok" and r["mode"] == "train"]
    summary["compile_speedup_geomean"] = geomean_of_timed([r["compile_speedup"] for r in ok])
    summary["under_1ms_eager"] = sum(r["eager_ms"] < 1.0 for r in ok)
    lines[6:6] = [f"Summary: `{json.dumps(summary)}`", ""]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(
        json.dumps({"env": env, "summary": summary, "problems": rows}, indent=1) + "\n"
    )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(json.dumps(summary))


def journal_from_result(result: Path, journal: Path) -> int:
    """Write ``journal`` (and its env file, with the commands so far) from a committed
    report, dropping the fields the report added; returns the number of rows."""
    data = json.loads(result.read_text())
    added = ("pub_", "ratio_", "why_")
    rows = [{k: v for k, v in r.items() if not k.startswith(added)} for r in data["problems"]]
    journal.parent.mkdir(parents=True, exist_ok=True)
    journal.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = dict(data["env"])
    env.setdefault("commands", [env["command"]] if "command" in env else [])
    journal.with_suffix(".env.json").write_text(json.dumps(env, indent=1))
    return len(rows)


def _num(name: str) -> int:
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() else 1 << 30


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--suite", default="own", help="'own' or a KernelBench-format folder")
    ap.add_argument("--levels", default=None)
    ap.add_argument("--size", default="full", help="our set's size (KernelBench has one)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--jobs", type=int, default=6, help="children compiling at once")
    ap.add_argument("--journal", default=None, help="JSONL of finished problems (resumable)")
    ap.add_argument("--budget", type=float, default=500, help="start no problem after this (s)")
    ap.add_argument("--timeout", type=float, default=300, help="one problem's limit (s)")
    ap.add_argument("--big-bytes", type=float, default=4 * 2**30)
    ap.add_argument("--max-bytes", type=float, default=24 * 2**30)
    ap.add_argument("--big-jobs", type=int, default=1, help="problems over --big-bytes at once")
    ap.add_argument(
        "--retry",
        default="",
        help="statuses to run again though journaled, e.g. 'timeout' (the new row wins)",
    )
    ap.add_argument("--report", action="store_true", help="write --out from the journal")
    ap.add_argument("--published", default=None, help="KernelBench's baseline_timing/H100_Modal")
    ap.add_argument("--out", default=None)
    ap.add_argument("--title", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument(
        "--lock",
        default=None,
        help="timing lock file (default JOURNAL.lock); share it "
        "between runs on one GPU so that only one times at once",
    )
    ap.add_argument(
        "--resume-from",
        default=None,
        help="a committed result (OUT.json of --report) to start --journal from when the "
        "journal does not exist yet: a fresh GPU machine carries no journal",
    )
    args = ap.parse_args()
    if not args.child and not args.journal:
        ap.error("--journal is required")
    if args.resume_from and not Path(args.journal).exists():
        n = journal_from_result(Path(args.resume_from), Path(args.journal))
        print(f"{args.journal}: {n} rows from {args.resume_from}", flush=True)
    if args.child:
        print(json.dumps(child(args.child, args.size, args.device, args.lock)), flush=True)
    elif args.report:
        if not args.out:
            ap.error("--report needs --out")
        report(args)
    else:
        from opbench.run.machine import environment

        env = environment(args.device)
        command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
        env_path = Path(args.journal).with_suffix(".env.json")
        env_path.parent.mkdir(parents=True, exist_ok=True)
        # a journal filled over several GPU calls keeps every call's command
        before = json.loads(env_path.read_text()) if env_path.exists() else {}
        earlier = before.get("commands") or ([before["command"]] if "command" in before else [])
        env["command"] = command
        env["commands"] = [*earlier, command]
        env_path.write_text(json.dumps(env, indent=1))
        run_suite(args)


if __name__ == "__main__":
    main()
