"""The timing self-test and an aten-vs-aten timing pass over real trace cases, on one GPU.

Fits one 10-minute GPU call: peaks and launch floor, ``run_selftest``, then the top
``--per-op`` argument sets of every included operator of the traces suite (all ops'
first set before any op's second, so a time limit keeps coverage), each timed
reference against candidate (both PyTorch's own kernel, true speedup 1.00), with a
roofline and the canary flags; then, time permitting, CUDA-graph replay times for the
first cases. A case that fails is recorded and skipped. Results go to
``benchmarks/results/selftest-<gpu>.json`` and ``.md`` (and under ``$OUT`` when set),
rewritten as the run goes so a cut-off run still leaves its data.

Usage: python benchmarks/reproduce/gpu_selftest.py --traces ../shared/traces [--per-op 2]

Committed result: ``benchmarks/results/selftest-h100.md`` and ``.json``:
    python benchmarks/reproduce/gpu_selftest.py --traces .gpu_data/traces --per-op 3
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

T0 = time.perf_counter()
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

import torch  # noqa: E402

from opbench.backends.aten import AtenBackend  # noqa: E402
from opbench.instrument.timing import (  # noqa: E402
    TimingOptions,
    clone_inputs,
    measure_launch_floor,
    time_graph_pair,
    time_pair,
)
from opbench.judge.roofline import cheat_check, measure_peaks, roofline, work_of  # noqa: E402
from opbench.judge.selftest import geomean, run_selftest, timing_row  # noqa: E402
from opbench.spec.args import parse_args  # noqa: E402
from opbench.spec.ops import get_overload  # noqa: E402
from opbench.suites.inputs import make_inputs, resolve_op_name  # noqa: E402
from opbench.suites.traces import build_trace_cases  # noqa: E402


def say(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


def env_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "host": platform.node(),
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info["gpu"] = props.name
        info["sm_count"] = props.multi_processor_count
        info["l2_bytes"] = int(getattr(props, "L2_cache_size", 0) or 0)
        info["memory_bytes"] = props.total_memory
    try:
        q = "driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu"
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
        fields = [f.strip() for f in out.splitlines()[0].split(",")]
        info.update(
            dict(zip(["driver", "sm_clock", "sm_clock_max", "power_limit", "temp_c"], fields))
        )
    except (OSError, IndexError, subprocess.SubprocessError) as e:
        info["driver"] = f"unknown ({type(e).__name__})"
    return info


def gpu_slug(name: str) -> str:
    m = re.search(r"\b([A-Za-z]{1,2}\d{2,4}[A-Za-z]?)\b", name)
    return (m.group(1) if m else re.sub(r"[^a-z0-9]+", "-", name.lower())).lower()


def first_float_dtype(args: Any) -> torch.dtype | None:
    ts = [t for t in _walk(args) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    return ts[0].dtype if ts else None


def _walk(obj: Any):
    if isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _walk(v)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _walk(v)
    else:
        yield obj


def pick_cases(traces: str, per_op: int, device: str) -> tuple[list[Any], int]:
    cases = build_trace_cases(traces, device=device)
    by_op: dict[str, list[Any]] = defaultdict(list)
    for c in cases:
        if c.included and len(by_op[c.op]) < per_op:
            by_op[c.op].append(c)
    ordered = [by_op[op][i] for i in range(per_op) for op in sorted(by_op) if i < len(by_op[op])]
    return ordered, len(by_op)


def stats(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    sp = [r[key] for r in rows if r.get(key) is not None and math.isfinite(r[key])]
    if not sp:
        return {"cases": 0, "geomean": None, "within_2pct": None, "within_5pct": None}
    return {
        "cases": len(sp),
        "geomean": geomean(sp),
        "within_2pct": sum(abs(s - 1) <= 0.02 for s in sp) / len(sp),
        "within_5pct": sum(abs(s - 1) <= 0.05 for s in sp) / len(sp),
        "worst": min(sp, key=lambda s: -abs(math.log(s))),
    }


def time_case(case: Any, opts: TimingOptions, peaks: Any, device: str) -> dict[str, Any]:
    row: dict[str, Any] = {"op": case.op, "args": case.args, "count": case.count}
    name = resolve_op_name(case.op)
    ref = get_overload(name)
    cand = AtenBackend(device).kernel_for(name)
    t0 = time.perf_counter()
    args, kwargs = make_inputs(case.op, parse_args(case.args), device, case.seed)
    row["inputs_s"] = time.perf_counter() - t0
    t = time_pair(ref, cand, lambda a=args, k=kwargs: (a, k), device, opts)
    row.update({k: v for k, v in timing_row("", t).items() if k != "case"})
    row.update(
        {
            "relative_runtime_to_kernel_launch": t.relative_runtime_to_kernel_launch,
            "mutating": t.mutating,
            "sleep_us": t.sleep_us,
            "side_stream_delta_us": (t.side_stream or {}).get("delta_us"),
            "ref_peak_mem_bytes": t.ref_peak_mem_bytes,
            "elapsed_ms": t.elapsed_ms,
        }
    )
    a2, k2 = clone_inputs((args, kwargs))
    out = ref(*a2, **k2)
    if device == "cuda":
        torch.cuda.synchronize()
    work = work_of(name, a2, k2, out)
    del out, a2, k2
    rl = roofline(work, t.ref_device_ms, peaks, first_float_dtype(args))
    row.update(
        {
            "bytes": work.bytes,
            "flops": work.flops,
            "sol_fraction": rl["sol_fraction"],
            "bound": rl["bound"],
            "achieved_GBps": rl["achieved_Bps"] / 1e9,
            "cheat": cheat_check(work, t.cand_device_ms, peaks, dtype=first_float_dtype(args)),
        }
    )
    del args, kwargs
    return row


def render_md(result: dict[str, Any]) -> str:
    e, a = result["env"], result["aten_vs_aten"]
    st = result["selftest"]

    def f(x: Any, d: int = 3) -> str:
        return "-" if x is None else (f"{x:.{d}f}" if isinstance(x, float) else str(x))

    lines = [
        f"# opbench timing self-test on {e.get('gpu')}",
        "",
        f"- device: {e.get('gpu')}, driver {e.get('driver')}, CUDA {e.get('cuda')}, "
        f"torch {e.get('torch')}, triton {e.get('triton')}, Python {e.get('python')}",
        f"- command: `{result['command']}`",
        f"- duration: {result['duration_s']:.1f} s (finished: {result['finished']})",
        f"- launch floor (torch.empty(0) between events, same protocol): {result['launch_floor_us']:.2f} us",
        f"- peaks: copy {result['peaks']['bandwidth_Bps'] / 1e12:.2f} TB/s; matmul "
        + ", ".join(
            f"{k} {v / 1e12:.0f} TFLOP/s" for k, v in result["peaks"]["matmul_flops"].items()
        ),
        "",
        "## Known-answer experiments (`run_selftest`)",
        "",
        "| experiment | result | expected | passed |",
        "| --- | --- | --- | --- |",
        f"| aten vs aten | geomean {f(st['aten_vs_aten']['geomean'], 4)}, within 2% {f(st['aten_vs_aten']['within_2pct'], 2)}, within 5% {f(st['aten_vs_aten']['within_5pct'], 2)} | {st['checks']['aten_vs_aten']['expect']} | {st['checks']['aten_vs_aten']['passed']} |",
        f"| double work | device geomean {f(st['double_work']['geomean'])} | {st['checks']['double_work']['expect']} | {st['checks']['double_work']['passed']} |",
        f"| host delay 20 us | host +{f(st['host_delay']['added_us'], 1)} us, device geomean {f(st['host_delay']['device_geomean'])} | {st['checks']['host_delay']['expect']} | {st['checks']['host_delay']['passed']} |",
        f"| side stream | device geomean {f(st['side_stream']['geomean'])}, flagged {st['side_stream'].get('flagged')}/{st['side_stream'].get('cases')} | {st['checks'].get('side_stream', {}).get('expect', 'n/a')} | {st['checks'].get('side_stream', {}).get('passed', '-')} |",
        "",
        "## aten vs aten over the traces suite",
        "",
        f"{a['cases']} cases over {result['ops_timed']} of {result['ops_included']} included operators "
        f"({result['per_op']} per op), {result['failed']} failed, {result['skipped']} skipped for time.",
        "",
        "| time | geomean | within ±2% | within ±5% | worst |",
        "| --- | --- | --- | --- | --- |",
        f"| device | {f(a['geomean'], 4)} | {f(a['within_2pct'], 3)} | {f(a['within_5pct'], 3)} | {f(a.get('worst'), 3)} |",
        f"| host-inclusive | {f(result['aten_vs_aten_host']['geomean'], 4)} | {f(result['aten_vs_aten_host']['within_2pct'], 3)} | {f(result['aten_vs_aten_host']['within_5pct'], 3)} | {f(result['aten_vs_aten_host'].get('worst'), 3)} |",
    ]
    g = result.get("graph") or {}
    if g.get("cases"):
        lines.append(
            f"| CUDA graph ({g['cases']} cases, {g['not_capturable']} not capturable) | {f(g['geomean'], 4)} | {f(g['within_2pct'], 3)} | {f(g['within_5pct'], 3)} | {f(g.get('worst'), 3)} |"
        )
    lines += ["", "Flags: " + ", ".join(f"{k} {v}" for k, v in result["flag_counts"].items()), ""]
    lines += [
        "## Per case (device speedup, spread = larger relative IQR, flags, roofline)",
        "",
        "| op | args | ref device us | speedup dev | ±1σ | spread | speedup host | reps | SOL | flags |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["cases"]:
        if "error" in r:
            lines.append(
                f"| {r['op']} | `{r['args'][:60]}` | error: {r['error'][:80]} | | | | | | | |"
            )
            continue
        lines.append(
            f"| {r['op']} | `{r['args'][:60]}` | {r['ref_device_us']:.2f} | {r['speedup_device']:.4f} | "
            f"{r['speedup_rel_err']:.4f} | {r['spread']:.3f} | {r['speedup_host']:.3f} | {r['reps']} | "
            f"{f(r.get('sol_fraction'), 2)} | {' '.join(r['flags'])}{' CHEAT' if r.get('cheat') else ''} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", default=str(REPO.parent / "shared" / "traces"))
    p.add_argument("--per-op", type=int, default=2)
    p.add_argument(
        "--time-limit", type=float, default=450.0, help="seconds: no new case after this"
    )
    p.add_argument(
        "--graph-until", type=float, default=520.0, help="seconds: graph pass stops here"
    )
    p.add_argument("--budget-ms", type=float, default=200.0)
    p.add_argument("--out-dir", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--quick-selftest", action="store_true")
    p.add_argument("--device", default="cuda", help="cuda; cpu only to smoke-test this script")
    p.add_argument("--max-cases", type=int, default=None, help="stop after this many cases")
    ns = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    dev = ns.device
    if dev == "cuda":
        if not torch.cuda.is_available():
            print("no CUDA device", file=sys.stderr)
            return 2
        torch.cuda.set_device(0)
    env = env_info()
    say(f"{env.get('gpu')} driver {env.get('driver')} torch {env['torch']} triton {env['triton']}")
    slug = gpu_slug(env.get("gpu", "gpu")) if dev == "cuda" else "cpu-smoke"
    outs = [Path(ns.out_dir)]
    if os.environ.get("OUT"):
        outs.append(Path(os.environ["OUT"]))
    result: dict[str, Any] = {
        "env": env,
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "per_op": ns.per_op,
        "finished": False,
        "ops_included": None,
        "skipped": 0,
    }

    def write() -> None:
        result["duration_s"] = time.perf_counter() - T0
        rows = result.get("cases", [])
        ok = [r for r in rows if "error" not in r]
        result["aten_vs_aten"] = stats(ok, "speedup_device")
        result["aten_vs_aten_host"] = stats(ok, "speedup_host")
        result["ops_timed"] = len({r["op"] for r in ok})
        result["failed"] = len(rows) - len(ok)
        result["flag_counts"] = dict(Counter(f for r in ok for f in r["flags"]))
        result["cheats_flagged"] = sum(1 for r in ok if r.get("cheat"))
        st = result.get("selftest") or {}
        for key in ("double_work", "host_delay", "side_stream"):
            if key in st:
                result[key] = {k: v for k, v in st[key].items() if k != "results"}
        for d in outs:
            try:
                d.mkdir(parents=True, exist_ok=True)
                (d / f"selftest-{slug}.json").write_text(json.dumps(result, indent=1, default=str))
            except OSError as e:
                say(f"could not write to {d}: {e}")
                continue
            if "selftest" in result and "peaks" in result:
                try:
                    (d / f"selftest-{slug}.md").write_text(render_md(result))
                except Exception as e:  # noqa: BLE001 - the JSON is the record
                    say(f"could not render markdown: {type(e).__name__}: {e}")

    peaks = measure_peaks(dev, use_cache=False)
    result["peaks"] = peaks.to_dict()
    say(f"peaks: copy {peaks.bandwidth_Bps / 1e12:.2f} TB/s, matmul {peaks.matmul_flops}")
    floor = measure_launch_floor(dev)
    result["launch_floor_us"] = floor * 1e3
    say(f"launch floor {floor * 1e3:.2f} us")

    st = run_selftest(dev, quick=ns.quick_selftest)
    result["selftest"] = st
    for key in ("aten_vs_aten", "double_work", "host_delay", "side_stream"):
        summary = {k: v for k, v in st[key].items() if k != "results"}
        say(f"selftest {key}: {summary} passed={st['checks'].get(key, {}).get('passed')}")
    result["cases"] = []
    write()

    cases, n_ops = pick_cases(ns.traces, ns.per_op, dev)
    if ns.max_cases is not None:
        cases = cases[: ns.max_cases]
    result["ops_included"] = n_ops
    say(f"{len(cases)} trace cases over {n_ops} included ops")
    opts = TimingOptions(budget_ms=ns.budget_ms)
    skipped = 0
    for i, case in enumerate(cases):
        if time.perf_counter() - T0 > ns.time_limit:
            skipped = len(cases) - i
            say(f"time limit: {skipped} cases skipped")
            break
        try:
            row = time_case(case, opts, peaks, dev)
            say(
                f"{i + 1}/{len(cases)} {case.op}: dev {row['speedup_device']:.4f} "
                f"(±{row['speedup_rel_err']:.4f}, {row['ref_device_us']:.1f} us, {row['reps']} reps) "
                f"host {row['speedup_host']:.3f} {' '.join(row['flags'])}"
            )
        except Exception as e:  # noqa: BLE001 - record, go on
            row = {"op": case.op, "args": case.args, "error": f"{type(e).__name__}: {str(e)[:300]}"}
            say(f"{i + 1}/{len(cases)} {case.op}: ERROR {row['error'][:120]}")
            if "out of memory" in str(e) and dev == "cuda":
                torch.cuda.empty_cache()
        result["cases"].append(row)
        if dev == "cuda" and torch.cuda.memory_reserved() > 40 * 1024**3:
            torch.cuda.empty_cache()
        if (i + 1) % 20 == 0:
            write()
    result["skipped"] = skipped
    write()

    # CUDA-graph replay, last (a failed capture is kept away from everything above).
    graph_rows = []
    for row in result["cases"]:
        if time.perf_counter() - T0 > ns.graph_until or "error" in row:
            continue
        try:
            name = resolve_op_name(row["op"])
            ref = get_overload(name)
            args, kwargs = make_inputs(row["op"], parse_args(row["args"]), dev, 0)
            g = time_graph_pair(
                ref, ref, lambda a=args, k=kwargs: (a, k), dev, opts, row["ref_device_us"] / 1e3
            )
            row["graph"] = g
            graph_rows.append(g)
        except Exception as e:  # noqa: BLE001
            row["graph"] = {"note": f"{type(e).__name__}: {str(e)[:200]}"}
            graph_rows.append(row["graph"])
    gs = stats([{"s": g.get("speedup")} for g in graph_rows], "s")
    gs["not_capturable"] = sum(1 for g in graph_rows if g.get("speedup") is None)
    result["graph"] = gs
    say(f"graph pass: {gs}")
    result["finished"] = True
    write()
    a = result["aten_vs_aten"]
    say(
        f"DONE aten-vs-aten device: {a['cases']} cases geomean {a['geomean']:.4f} "
        f"within2 {a['within_2pct']:.3f} within5 {a['within_5pct']:.3f}; failed {result['failed']}; "
        f"selftest passed {st['passed']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
