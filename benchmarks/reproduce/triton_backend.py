"""The reference Triton backend on a GPU: launch cost, bandwidth, and the traces suite
against eager and against FlagGems.

Parts (``--parts``, default all):

* ``launch``: host time per call of a 1,024-element f16 ``add`` (wall clock over 2,000
  back-to-back calls, then a synchronize: what an eager model pays), for eager, our
  launch path (:class:`opbench.kernels._lib.launch.Launcher`), the same kernel through a
  plain ``kernel[grid](...)`` and our kernel registered into PyTorch with
  ``opbench.enable`` (so ``torch.add`` dispatches to it).
* ``bandwidth``: device time (CUDA events; the fastest of 5 rounds' medians of 30, ours
  and eager alternating) of ``add``, ``relu``, ``clone`` and ``sum`` on 256 MiB inputs in f16 and f32, as bytes moved over
  time against the copy bandwidth ``judge.roofline.measure_peaks`` measures; eager beside.
* ``traces``: ``opbench run --suite traces --backend triton --device cuda`` over the
  covered ops (``--limit-per-op 4``, most used cases first), timed; its ``summary.json``
  is written to ``benchmarks/results/triton-<gpu>.json`` with the launch and bandwidth
  numbers added.
* ``opinfo``: correctness only (``--no-perf``), the quick OpInfo profile for every covered
  op in ``--dtypes`` (f16, bf16, f32) on CUDA, 4 workers (Triton compiles in parallel); the
  summary goes to ``benchmarks/results/triton-<gpu>-opinfo.json``. With ``--ops`` the suite
  maps only the OpInfos that reach the covered ops (``opinfo_aliases.json``): seconds,
  where the full float16 mapping did not finish in 265 s on a fresh H100.
* ``part2``: the matmul family and convolution (issue 13), ``--part2-limit`` most used
  traced cases per op, timed; ``benchmarks/results/triton-part2-<gpu>.json`` and ``.md``
  with the geomeans the issue's targets name (matmuls of at least 1 GFLOP, convolutions).
  ``--part2-from DIR`` summarizes a run carried back from the GPU instead.
* ``torch.compile`` as the second baseline: ``benchmarks/reproduce/compile_baseline.py`` over the
  ``traces`` and ``part2`` run directories (``--work``), after them.
* ``flaggems``: the same cases with ``--backend module:flag_gems:enable``, written to
  ``benchmarks/results/flaggems-<gpu>.json``.

A markdown table of both runs (per op: device and host speedups, achieved bandwidth and
fraction of speed of light) goes to ``benchmarks/results/triton-<gpu>.md``.

Usage (on the GPU machine, after ``source benchmarks/common/gpu_env.sh``, which installs the
wheels carried in ``.whl/ex`` and ``.whl/fg``; carry them and ``.gpu_data`` (the traces);
device calls of under 10 minutes each). A traces run takes ~300 s for ours and longer for
FlagGems (each operator's worker compiles its Triton kernels cold, ~5 s an operator on a
fresh machine): give each part ``--budget`` seconds and continue an interrupted one in the
next call with ``--resume --work DIR`` (carry DIR back and forth):
    python3 benchmarks/reproduce/triton_backend.py --parts opinfo --copy-to $OUT
    python3 benchmarks/reproduce/triton_backend.py --traces .gpu_data/traces \
        --parts launch,bandwidth,traces --copy-to $OUT
    python3 benchmarks/reproduce/triton_backend.py --traces .gpu_data/traces --parts flaggems,report \
        --resume --copy-to $OUT
(``--copy-to``: the results files this call wrote, copied where the device tool brings
files back from; ``pack_run`` of ``gpu_env.sh`` packs a run directory to resume from.)

Committed results: ``benchmarks/results/triton-h100.md``/``.json`` and ``flaggems-h100.json``
(the three commands above), ``triton-h100-opinfo.json`` (``--parts opinfo``),
``triton-part2-h100.md``/``.json`` (``--parts part2``), ``triton-part2-h100-opinfo.json``
(``--parts opinfo`` with ``--ops mm,bmm,addmm,baddbmm,convolution,convolution_backward``) and
``triton-bandwidth-h100-2026-11-25.json`` (``--parts bandwidth``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from opbench.report.means import geomean_of_timed

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"

#: The ops the backend covers that the traces use (bare names: every traced overload).
COVERED = (
    "add,add_,sub,rsub,mul,mul_,div,div_,neg,relu,relu_,sigmoid,tanh,silu,silu_,gelu,"
    "hardtanh,hardtanh_,where,threshold_backward,hardtanh_backward,sigmoid_backward,"
    "tanh_backward,silu_backward,gelu_backward,copy_,clone,cat,sum,mean,amax,_softmax,"
    "_softmax_backward_data,_log_softmax,_log_softmax_backward_data,native_layer_norm,"
    "native_layer_norm_backward,native_batch_norm,native_batch_norm_backward,embedding,"
    "embedding_dense_backward,hardsigmoid,hardsigmoid_,hardsigmoid_backward,hardswish,"
    "hardswish_,hardswish_backward,leaky_relu,leaky_relu_,leaky_relu_backward,elu,elu_,"
    "elu_backward,exp,exp_,sqrt,sqrt_,rsqrt,rsqrt_,reciprocal,reciprocal_,minimum,maximum,"
    "pow.Tensor_Scalar,pow.Tensor_Scalar_out,pow_.Scalar,clamp.default,clamp.out,"
    "clamp_.default,masked_fill.Scalar,masked_fill.Scalar_out,masked_fill_.Scalar"
)


#: Part 2 of the backend (issue 13): the matmul family and convolution. Every traced case
#: is f16; their targets are separate from part 1's (device time against eager: matmuls of
#: at least 1 GFLOP, and all convolutions).
PART2 = "mm,bmm,addmm,baddbmm,convolution,convolution_backward"
MATMULS = ("mm", "addmm", "bmm", "baddbmm")


def part2_summary(run_dir: Path) -> dict[str, Any]:
    """Per traced case of a part-2 run: speedups, times and FLOPs; and the geomeans the
    issue's targets name (matmuls of >= 1 GFLOP, convolutions)."""
    con = sqlite3.connect(run_dir / "results.sqlite")
    rows = []
    for op, status, args, sp, sph, ref, cand, det in con.execute(
        "select op, status, args, speedup, speedup_host, ref_device_ms, cand_device_ms, "
        "details from results order by op, ref_device_ms desc"
    ):
        flops = ((json.loads(det or "{}") or {}).get("roofline") or {}).get("flops")
        rows.append({"op": op, "status": status, "args": args, "speedup": _r(sp),
                     "speedup_host": _r(sph), "eager_ms": ref, "ours_ms": cand,
                     "gflop": round(flops / 1e9, 3) if flops else None})  # fmt: skip
    con.close()
    ok = [r for r in rows if r["status"] == "passed" and r["speedup"]]
    big = [r["speedup"] for r in ok if r["op"].split(".")[0] in MATMULS and (r["gflop"] or 0) >= 1]
    conv = [r["speedup"] for r in ok if r["op"].startswith("convolution")]
    return {
        "tests": len(rows),
        "passed": sum(r["status"] == "passed" for r in rows),
        "matmul_1gflop": {"cases": len(big), "speedup_geomean": _gm(big), "target": 0.8},
        "convolution": {"cases": len(conv), "speedup_geomean": _gm(conv), "target": 0.7},
        "cases": rows,
    }


def render_part2(s: dict[str, Any], gpu: str) -> list[str]:
    env = s.get("env") or {}
    mm, cv = s["matmul_1gflop"], s["convolution"]
    lines = [
        f"# Reference Triton backend, part 2 (matmul, convolution) on {gpu}",
        "",
        f"torch {env.get('torch')}, triton {env.get('triton')}, {env.get('gpu')}; traces "
        f"suite, every case f16; {_command(s)}. Speedup: eager device time over ours (CUDA "
        "events, L2 flushed), above 1 is faster.",
        "",
        f"- correct: {s['passed']} of {s['tests']} tests",
        f"- matmuls of 1 GFLOP or more: geomean {mm['speedup_geomean']} over {mm['cases']} "
        f"cases (target {mm['target']})",
        f"- convolutions (forward and backward): geomean {cv['speedup_geomean']} over "
        f"{cv['cases']} cases (target {cv['target']})",
        "",
        "| op | GFLOP | eager ms | ours ms | device | host | args |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in s["cases"]:
        ms = lambda v: f"{v:.4f}" if v else "-"  # noqa: E731
        lines.append(
            f"| {r['op']} | {r['gflop']} | {ms(r['eager_ms'])} | {ms(r['ours_ms'])} | "
            f"{r['speedup']} | {r['speedup_host']} | `{r['args'][:120]}` |"
        )
    return lines + render_compile(RESULTS / f"triton-part2-compile-{gpu}.json")


def render_compile(path: Path) -> list[str]:
    """The ``torch.compile`` baseline on the same run's cases
    (``benchmarks/reproduce/compile_baseline.py --report``), per op, when it was measured."""
    if not path.exists():
        return []
    sys.path.insert(0, str(REPO / "benchmarks" / "reproduce"))
    import compile_baseline

    c = json.loads(path.read_text())
    return [
        "",
        "## Against torch.compile (Inductor, default mode)",
        "",
        f"From `{path.name}` (`{c.get('command')}`):",
        "",
        *compile_baseline.table(c),
    ]


def _gpu_tag() -> str:
    import torch

    name = torch.cuda.get_device_name().lower()
    return next((t for t in ("h200", "h100", "a100", "l40") if t in name), "gpu")


# ----------------------------------------------------------------------------- launch


def _launch_profile() -> Any:
    """benchmarks/reproduce/launch_profile.py (imports torch and triton: only on the GPU machine)."""
    sys.path.insert(0, str(REPO / "benchmarks" / "reproduce"))
    import launch_profile

    return launch_profile


def _host_us(fn: Any, calls: int = 2000) -> float:
    return _launch_profile().per_call_us(fn, calls)


def launch_cost() -> dict[str, Any]:
    import torch

    import opbench
    from opbench.kernels._lib import arithmetic as ar
    from opbench.kernels._lib import pointwise as pw
    from opbench.kernels._lib import pointwise_kernels as pwk

    a = torch.randn(1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, device="cuda", dtype=torch.float16)
    out = torch.empty_like(a)
    kernel = pwk._flat_kernel
    consts = dict(FN=ar._add, A=1, B=1, C=0, COMPUTE=pw.tl.float32, BLOCK=pw.BLOCK, IDX=pw.tl.int32)

    def plain() -> None:
        kernel[(1,)](a, b, a, out, 1024, 0.0, 0.0, 0.0, 1.0, 0.0, **consts)

    def launcher_only() -> None:
        pw._flat((1,), (a, b, a, out, 1024, 0.0, 0.0, 0.0, 1.0, 0.0), **consts)

    res = {
        "what": "host-inclusive us per call, 1,024-element f16 add, best of 5 x 2,000 calls",
        "eager torch.add": _host_us(lambda: torch.add(a, b)),
        "eager torch.empty_like (allocation alone)": _host_us(lambda: torch.empty_like(a)),
        "plain kernel[grid](...) into a preallocated out": _host_us(plain),
        "Launcher into a preallocated out": _host_us(launcher_only),
        "opbench.kernels add (allocates its output)": _host_us(lambda: ar.add(a, b)),
    }
    with opbench.backend("triton", "cuda", ops=["add.Tensor"]):
        res["torch.add dispatched to the Triton backend (torch.library)"] = _host_us(
            lambda: torch.add(a, b)
        )
    return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in res.items()}


# ----------------------------------------------------------------------------- bandwidth


def _device_ms(fn: Any, reps: int = 30) -> float:
    return _launch_profile().device_ms(fn, reps)


#: Rounds of the bandwidth part, ours and eager alternating (each a median of 30 timed
#: calls); each side keeps its fastest round's median. One median was not enough on the
#: H100: in one call eager's f32 clone took 0.2395 ms and our f32 sum 0.1288 (0.697 of
#: copy bandwidth), in the next, same code, 0.1864 and 0.1038 (0.865): slow phases of
#: the machine hit both sides, minutes apart.
BANDWIDTH_ROUNDS = 5


def _bandwidth_rows(x: Any, y: Any, copy_Bps: float) -> list[dict[str, Any]]:
    import torch

    from opbench.kernels._lib import activations as act
    from opbench.kernels._lib import arithmetic as ar
    from opbench.kernels._lib import copy as cp

    n, item = x.numel(), x.element_size()
    cases = {
        "add": (3 * n * item, lambda: ar.add(x, y), lambda: torch.add(x, y)),
        "relu": (2 * n * item, lambda: act.relu(x), lambda: torch.relu(x)),
        "clone": (2 * n * item, lambda: cp.clone(x), lambda: x.clone()),
    }
    try:
        from opbench.kernels._lib import reduction_ops

        cases["sum"] = (n * item, lambda: reduction_ops.sum_default(x), lambda: x.sum())
    except (ImportError, AttributeError):
        pass
    rows = []
    for name, (nbytes, ours, eager) in cases.items():
        rounds = [(_device_ms(ours), _device_ms(eager)) for _ in range(BANDWIDTH_ROUNDS)]
        t_ours, t_eager = min(r[0] for r in rounds), min(r[1] for r in rounds)
        rows.append(
            {
                "op": name,
                "dtype": str(x.dtype).removeprefix("torch."),
                "MiB_in": 256,
                "ours_ms": round(t_ours, 4),
                "eager_ms": round(t_eager, 4),
                "ours_GBps": round(nbytes / t_ours / 1e6, 1),
                "eager_GBps": round(nbytes / t_eager / 1e6, 1),
                "fraction_of_copy_bw": round(nbytes / (t_ours / 1e3) / copy_Bps, 3),
                "round_medians_ms": [[round(o, 4), round(e, 4)] for o, e in rounds],
            }
        )
    return rows


def bandwidth() -> dict[str, Any]:
    import torch

    from opbench.judge.roofline import measure_peaks

    peaks = measure_peaks("cuda")
    rows = []
    for dtype in (torch.float16, torch.float32):
        n = (256 << 20) // torch.tensor([], dtype=dtype).element_size()
        x = torch.randn(n, device="cuda", dtype=dtype)
        y = torch.randn(n, device="cuda", dtype=dtype)
        rows += _bandwidth_rows(x, y, peaks.bandwidth_Bps)
        del x, y
    return {"copy_bandwidth_GBps": round(peaks.bandwidth_Bps / 1e9, 1), "rows": rows}


# ----------------------------------------------------------------------------- traces


def opbench_run(args: list[str], out: Path, budget_s: float, resume: bool) -> dict[str, Any]:
    """``opbench run ARGS --out OUT`` within ``budget_s`` (its log in ``OUT.log``); its
    summary with the command and wall time added. ``resume`` continues a run a previous
    device call left unfinished (``--resume``: finished tests are kept)."""
    if not resume:
        subprocess.run(["rm", "-rf", str(out)])
    args = [*args, "--out", str(out), *(["--resume"] if resume else [])]
    cmd = [sys.executable, "-m", "opbench.cli", "run", *args]
    t0 = time.perf_counter()
    log = out.with_suffix(".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        try:
            rc: Any = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=budget_s)
            rc = rc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    print(log.read_text()[-3000:])
    summary = out / "summary.json"
    s = json.loads(summary.read_text()) if summary.exists() and rc != "timeout" else {}
    s["benchmark"] = {
        "command": "opbench run " + " ".join(args),
        "rc": rc,
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    return s


def traces_run(
    backend: str, traces: str, out: Path, budget_s: float, resume: bool = False
) -> dict[str, Any]:
    args = [
        "--suite", "traces", "--traces", traces, "--backend", backend, "--device", "cuda",
        "--ops", COVERED, "--limit-per-op", "4",
    ]  # fmt: skip
    return opbench_run(args, out, budget_s, resume)


#: Cases whose eager device time is at least this long (ms) are where a backend's launch
#: cost must not show: the issue's host-inclusive target there is 0.9x eager.
LONG_CASE_MS = 0.020


def long_cases_host(run_dir: Path) -> dict[str, Any]:
    """Host-inclusive geomean over every correct test whose eager device time is at
    least :data:`LONG_CASE_MS` (all ops together)."""
    db = run_dir / "results.sqlite"
    if not db.exists():
        return {}
    con = sqlite3.connect(db)
    v = [
        r[0]
        for r in con.execute(
            "select speedup_host from results where status = 'passed' and ref_device_ms >= ?",
            (LONG_CASE_MS,),
        )
    ]
    con.close()
    return {"cases": len(v), "speedup_host_geomean": _gm(v)}


def per_op(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per overload: tests, passed, geomean device/host speedup, median bandwidth/SOL."""
    db = run_dir / "results.sqlite"
    if not db.exists():
        return {}
    con = sqlite3.connect(db)
    rows = con.execute(
        "select op, status, category, speedup, speedup_host, details, ref_device_ms from results"
    )
    ops: dict[str, dict[str, Any]] = {}
    for op, status, category, sp, sph, details, ref_ms in rows:
        o = ops.setdefault(
            op,
            {"tests": 0, "passed": 0, "fail": {}, "sp": [], "sph": [], "bw": [], "sol": [],
             "sph20": []},
        )  # fmt: skip
        if sph and ref_ms and ref_ms >= LONG_CASE_MS:
            o["sph20"].append(sph)
        o["tests"] += 1
        if status == "passed":
            o["passed"] += 1
        elif category:
            o["fail"][category] = o["fail"].get(category, 0) + 1
        if sp:
            o["sp"].append(sp)
        if sph:
            o["sph"].append(sph)
        roof = (json.loads(details or "{}") or {}).get("roofline") or {}
        cand = roof.get("cand") or {}
        if cand.get("achieved_Bps") and cand["achieved_Bps"] == cand["achieved_Bps"]:
            o["bw"].append(cand["achieved_Bps"] / 1e9)
            o["sol"].append(cand.get("sol_fraction"))
    con.close()

    return {
        op: {
            "tests": o["tests"],
            "passed": o["passed"],
            "failures": o["fail"],
            "speedup": _gm(o["sp"]),
            "speedup_host": _gm(o["sph"]),
            "host_cases_20us": len(o["sph20"]),
            "speedup_host_20us": _gm(o["sph20"]),
            "GBps_median": round(statistics.median(o["bw"]), 1) if o["bw"] else None,
            "sol_median": round(statistics.median([s for s in o["sol"] if s]), 3)
            if [s for s in o["sol"] if s]
            else None,
        }
        for op, o in sorted(ops.items())
    }


def _gm(values: list[Any]) -> float | None:
    """The timed rows' geomean, to three places."""
    return None if (g := geomean_of_timed(values)) is None else round(g, 3)


def _r(x: Any) -> Any:
    return round(x, 3) if isinstance(x, float) else x


def _command(s: dict[str, Any]) -> str:
    b = s.get("benchmark") or {}
    cmd = str(b.get("command", "")).replace(COVERED, "<COVERED>")
    return f"`{cmd}` (rc {b.get('rc')}, {b.get('wall_s')} s in the last device call)"


def shared_ops(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """The overloads both backends ran and passed every test of: geomean speedups of
    each over them, and the ops where FlagGems is ahead on device or host time."""
    a, b = ours.get("per_op") or {}, theirs.get("per_op") or {}
    ops = sorted(
        op
        for op in set(a) & set(b)
        if a[op]["tests"] and a[op]["passed"] == a[op]["tests"]
        and b[op]["tests"] and b[op]["passed"] == b[op]["tests"]
    )  # fmt: skip
    ahead = [
        op
        for op in ops
        if (b[op]["speedup"] or 0) > (a[op]["speedup"] or 0)
        or (b[op]["speedup_host"] or 0) > (a[op]["speedup_host"] or 0)
    ]
    return {
        "ops": len(ops),
        "ours_device": _gm([a[o]["speedup"] for o in ops]),
        "flaggems_device": _gm([b[o]["speedup"] for o in ops]),
        "ours_host": _gm([a[o]["speedup_host"] for o in ops]),
        "flaggems_host": _gm([b[o]["speedup_host"] for o in ops]),
        "flaggems_ahead": ahead,
    }


def render(ours: dict[str, Any], theirs: dict[str, Any], gpu: str) -> list[str]:
    lines = [f"# Reference Triton backend on {gpu}", ""]
    env = ours.get("env") or {}
    lines += [
        f"torch {env.get('torch')}, triton {env.get('triton')}, {env.get('gpu')}; "
        f"traces suite, `--limit-per-op 4`; speedups are geomeans over an op's correct "
        "tests (device: CUDA events with L2 flush; host: wall clock over back-to-back calls).",
        "`<COVERED>` is `benchmarks/reproduce/triton_backend.py`'s COVERED list.",
        "",
    ]
    for name, s in (("opbench.kernels (ours)", ours), ("FlagGems", theirs)):
        if not s:
            continue
        per = s.get("per_op") or {}
        if s.get("correctness_score") is None and per:
            tests = sum(o["tests"] for o in per.values())
            lines.append(
                f"- **{name}**: did not finish ({len(per)} overloads, {tests} tests reached; "
                f"no run-wide scores); {_command(s)}"
            )
            continue
        lines.append(
            f"- **{name}**: correctness {_r(s.get('correctness_score'))} over "
            f"{s.get('ops_in_denominator')} overloads, performance_score (device) "
            f"{_r(s.get('performance_score'))}, performance_score_host "
            f"{_r(s.get('performance_score_host'))}; {_command(s)}"
        )
    for name, s in (("ours", ours), ("FlagGems", theirs)):
        lc = s.get("long_cases_host") or {}
        if lc.get("cases"):
            lines.append(
                f"- {name}, cases of {LONG_CASE_MS * 1e3:.0f} µs or more eager device time: "
                f"host-inclusive geomean {lc['speedup_host_geomean']} over {lc['cases']} tests"
            )
    both = shared_ops(ours, theirs)
    if both["ops"]:
        lines += [
            "",
            f"On the {both['ops']} overloads both ran and passed: device geomean ours "
            f"{both['ours_device']} vs FlagGems {both['flaggems_device']}, host ours "
            f"{both['ours_host']} vs FlagGems {both['flaggems_host']}. FlagGems ahead on "
            f"device or host time: {', '.join(both['flaggems_ahead']) or 'none'}.",
        ]
    lines.append("")
    launch = ours.get("launch_cost")
    if launch:
        lines += [
            "## Launch cost",
            "",
            f"{launch.get('what')}:",
            "",
            "| path | µs/call |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v} |" for k, v in launch.items() if k != "what"]
        lines.append("")
    bw = ours.get("bandwidth")
    if bw:
        lines += [
            "## Bandwidth on 256 MiB inputs",
            "",
            f"copy bandwidth measured by `measure_peaks`: {bw['copy_bandwidth_GBps']} GB/s; "
            "device time of each side: CUDA events, the fastest of the rounds' medians of 30 "
            "calls, ours and eager alternating (`round_medians_ms` in the JSON where present)",
            "",
            "| op | dtype | ours ms | eager ms | ours GB/s | eager GB/s | fraction of copy bw |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['op']} | {r['dtype']} | {r['ours_ms']} | {r['eager_ms']} | {r['ours_GBps']} | "
            f"{r['eager_GBps']} | {r['fraction_of_copy_bw']} |"
            for r in bw["rows"]
        ]
        lines.append("")
    a, b = ours.get("per_op") or {}, theirs.get("per_op") or {}
    lines += [
        "## Per op (traces)",
        "",
        "| op | ours passed | ours device | ours host | ours host, eager >= 20 µs | ours GB/s | ours SOL | FlagGems passed | FG device | FG host | failures (ours / FG) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for op in sorted(set(a) | set(b)):
        x, y = a.get(op, {}), b.get(op, {})
        lines.append(
            f"| {op} | {x.get('passed', '-')}/{x.get('tests', '-')} | {x.get('speedup')} | "
            f"{x.get('speedup_host')} | {x.get('speedup_host_20us') or '-'} "
            f"({x.get('host_cases_20us', 0)}) | {x.get('GBps_median')} | {x.get('sol_median')} | "
            f"{y.get('passed', '-')}/{y.get('tests', '-')} | {y.get('speedup')} | "
            f"{y.get('speedup_host')} | {x.get('failures') or ''} / {y.get('failures') or ''} |"
        )
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", default="../shared/traces")
    p.add_argument("--parts", default="launch,bandwidth,traces,flaggems,report")
    p.add_argument("--budget", type=float, default=420.0, help="seconds per traces run")
    p.add_argument("--work", default="/tmp/triton_backend_runs", help="run directories")
    p.add_argument(
        "--resume", action="store_true", help="continue the runs in --work (carried back)"
    )
    p.add_argument("--dtypes", default="f16,bf16,f32", help="opinfo part's dtypes")
    p.add_argument("--gpu", help="results tag (h100); default from the GPU (report part only)")
    p.add_argument("--part2-limit", type=int, default=8, help="part2: cases per op")
    p.add_argument("--part2-from", help="part2: summarize this finished run directory "
                   "(carried back from the GPU) instead of running")  # fmt: skip
    p.add_argument("--part2-command", default="", help="with --part2-from: the command run")
    p.add_argument(
        "--copy-to",
        help="also copy every results file this call wrote here (a device call's $OUT: "
        "only $OUT comes back from the GPU machine)",
    )
    a = p.parse_args()
    started = time.time()
    parts = set(a.parts.split(","))
    gpu = a.gpu or _gpu_tag()
    RESULTS.mkdir(parents=True, exist_ok=True)
    work = Path(a.work)
    ours_path, theirs_path = RESULTS / f"triton-{gpu}.json", RESULTS / f"flaggems-{gpu}.json"
    ours = json.loads(ours_path.read_text()) if ours_path.exists() else {}
    theirs = json.loads(theirs_path.read_text()) if theirs_path.exists() else {}
    extra: dict[str, Any] = {k: ours[k] for k in ("launch_cost", "bandwidth") if k in ours}
    if "launch" in parts:
        extra["launch_cost"] = launch_cost()
        print(json.dumps(extra["launch_cost"], indent=1))
    if "bandwidth" in parts:
        extra["bandwidth"] = bandwidth()
        print(json.dumps(extra["bandwidth"], indent=1))
    if "traces" in parts:
        out = work / "triton"
        ours = traces_run("triton", a.traces, out, a.budget, a.resume)
        ours["per_op"] = per_op(out)
        ours["long_cases_host"] = long_cases_host(out)
    ours.update(extra)
    if ours:
        ours_path.write_text(json.dumps(ours, indent=1, default=str))
    if "opinfo" in parts:
        args = [
            "--suite", "opinfo", "--backend", "triton", "--device", "cuda", "--ops", COVERED,
            "--dtypes", a.dtypes, "--no-perf", "--workers", "4",
        ]  # fmt: skip
        out = work / "opinfo"
        s = opbench_run(args, out, a.budget, a.resume)
        s["per_op"] = per_op(out)
        (RESULTS / f"triton-{gpu}-opinfo.json").write_text(json.dumps(s, indent=1, default=str))
        print(json.dumps({k: s.get(k) for k in ("correctness_score", "tests")}, indent=1))
    if "part2" in parts or a.part2_from:
        out = Path(a.part2_from) if a.part2_from else work / "part2"
        if not a.part2_from:
            args = [
                "--suite", "traces", "--traces", a.traces, "--backend", "triton",
                "--device", "cuda", "--ops", PART2, "--limit-per-op", str(a.part2_limit),
            ]  # fmt: skip
            s = opbench_run(args, out, a.budget, a.resume)
        else:
            s = json.loads((out / "summary.json").read_text())
            s["benchmark"] = {
                "command": a.part2_command,
                "rc": 0,
                "wall_s": (s.get("timing_s") or {}).get("run"),
            }
        s.update(part2_summary(out))
        base = RESULTS / f"triton-part2-{gpu}"
        base.with_suffix(".json").write_text(json.dumps(s, indent=1, default=str))
        base.with_suffix(".md").write_text("\n".join(render_part2(s, gpu)) + "\n")
        print("\n".join(render_part2(s, gpu)[:8]))
    if "flaggems" in parts:
        out = work / "flaggems"
        theirs = traces_run("module:flag_gems:enable", a.traces, out, a.budget, a.resume)
        theirs["per_op"] = per_op(out)
        theirs["long_cases_host"] = long_cases_host(out)
        theirs_path.write_text(json.dumps(theirs, indent=1, default=str))
    md = render(ours, theirs, gpu)
    (RESULTS / f"triton-{gpu}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    if a.copy_to:
        copy_written(RESULTS, Path(a.copy_to), started)
    return 0


def copy_written(results: Path, dest: Path, since: float) -> list[Path]:
    """Copy the files in ``results`` modified at or after ``since`` into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for f in sorted(results.iterdir()):
        if f.is_file() and f.stat().st_mtime >= since:
            copied.append(Path(shutil.copy2(f, dest / f.name)))
    print(f"copied {len(copied)} results file(s) to {dest}")
    return copied


if __name__ == "__main__":
    raise SystemExit(main())
