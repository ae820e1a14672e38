"""Every traced matmul-family product of at least ``--min-gflop`` on both halves of the
traces, timed on eager (cuBLAS), on what the backend serves it today, and on both of the
backend's kernels over one fixed set of configurations: the data a shape rule is fitted
to on the tuning half and checked on the held-out half (issue #36: "heuristics and
kernels that hold across shapes rather than tables of exact products").

Why one fixed set and not a tuner's search: a rule can only choose among what was timed
on every product, and a fixed set times the same candidates on the rows it is fitted on
and on the rows it is judged on. The set is the rule's own
(:func:`opbench.kernels._lib.matmul_rule.candidates`): the pointer kernel on six tiles,
the TMA kernel (batch 1 only) on five, and split-K on both where 128x128 or 64x128 tiles
fill less than half the SMs.

Rows: :func:`matmul_rows.judged_products` of the matmul family (each op's ``--limit`` most
used traced calls, as the judge picks them), distinct by what the kernels see
(:func:`kernel_key`). ``served``: what the entry points run (``matmul_ruled_into``: the
shape rule since 2026-11-29; the exact-product and bucket tables before).

Every candidate's result is checked against eager's (:func:`matmul_timing.agrees`) before
its time counts; a failure or a wrong result is recorded as ``inf`` with the reason.
Timing: device time by the judge's protocol (:func:`matmul_timing.device_bench`: L2
overwritten and the GPU kept ahead of the host before each of 15 calls, median), so a
host path longer than the kernel does not leak in; ``--timing do_bench`` for
``triton.testing.do_bench`` (the first sweep of 2026-11-29, which it misled: see
``matmul_timing.device_bench``). Kernels compile first in ``--jobs`` processes. Results go to ``--out`` as JSON lines, one a product,
appended as they come (a call cut at its limit keeps what it finished; ``--resume``
skips them).

``--variant NAME=MODULE.NAME=VALUE[,...]`` also times the served path under those module
settings (kept as ``served@NAME:``; the matmul's plans and lanes dropped on the way in
and out), and the end of the run prints each variant against the served path, per half,
over the products whose time it moved past the noise and over the rest: a setting the
convolutions were timed on (``matmul.SPLIT_WHOLE_WAVES``) A/B'd on the matmuls too.

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/tune/matmul_paths.py --traces .gpu_data/traces --out $OUT/paths.jsonl
then, on any machine, ``matmul_rule.py paths.jsonl`` fits and reports the rule.
On the CPU (``--device cpu``, the interpreter) it checks results and times nothing, at
about 10 minutes a product; every candidate is checked against eager there by
``tests/kernels/test_matmul_rule.py`` instead.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from matmul_rows import OPS, judged_products, operands, reference  # noqa: E402
from matmul_rule import time_key  # noqa: E402
from matmul_timing import agrees, device_bench  # noqa: E402

from opbench.kernels._lib.matmul_rule import candidates, layout_key, small_candidates  # noqa: E402

__all__ = ["kernel_key", "main", "products", "time_product", "variant_summary"]

#: ``--variant`` name -> its ``MODULE.NAME=VALUE`` settings (module state, so the warm-up
#: processes are handed it with each task).
VARIANTS: dict[str, list[str]] = {}
#: ``--small`` times only the served path and the small-product rule's candidates
#: (:func:`matmul_rule.small_candidates <opbench.kernels._lib.matmul_rule.small_candidates>`)
#: on each product when set: the sweep the small-product rule is fitted on
#: (``matmul_rule.py --small``). The 2026-12-02 sweep also timed a padded copy of operands
#: whose rows are not 16-byte multiples (``pad:``; it lost to the tables, and is gone).
SMALL_ONLY: list[bool] = [False]


def variant_context(name: str | None) -> Any:
    """The settings of variant ``name`` in force inside the block, the matmul's launch
    plans and lanes dropped on the way in and out (a plan made under other settings
    would serve it); no change for None."""
    import contextlib

    if name is None:
        return contextlib.nullcontext()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
    from kernel_overrides import overridden

    from opbench.kernels._lib import matmul, matmul_lanes

    return overridden(VARIANTS[name], (matmul._MM_PLANS, matmul._MM_LANES, matmul_lanes.LANES))


def candidate_name(kind: str, cfg: Any) -> str:
    """The key a candidate's time is kept under: :func:`matmul_rule.time_key`'s, and
    ``served@NAME:`` for a variant."""
    return f"served@{cfg}:" if kind == "variant" else time_key(kind, cfg)


def run_candidate(kind: str, cfg: tuple[int, ...] | None, ops: tuple) -> bool:
    """Launch one candidate on the operands ``(out, a, b, bias, alpha, beta)``: ``served``
    what the entry points run (the shape rule), ``tables`` what they ran before it (the
    exact-product and bucket tables), ``ptr``, ``tma`` or ``tmab`` one kernel on ``cfg``;
    False where the TMA kernel declines the call."""
    from opbench.kernels._lib import matmul, matmul_tma

    if kind in ("served", "variant"):  # a variant's settings are in force around it
        matmul.matmul_ruled_into(*ops)
    elif kind == "tables":
        matmul.matmul_into(*ops)
    elif kind == "tma":
        return matmul_tma.tma_matmul_into(*ops, cfg)
    elif kind == "tmab":
        from opbench.kernels._lib.matmul_tma_batched import tma_bmm_into

        return tma_bmm_into(*ops, cfg)
    else:
        matmul.matmul_into(*ops, cfg)
    return True


def products(traces: str, min_gflop: float, limit: int) -> list[dict[str, Any]]:
    """The distinct products of both halves, each row with its half, the halves
    interleaved (a call cut at its budget has timed as much of each)."""
    import itertools

    halves = []
    for half in ("tuning", "heldout"):
        rows, seen = [], set()
        for r in judged_products(traces, min_gflop, limit, split=half):
            if r["op"] not in OPS or kernel_key(r) in seen:
                continue
            seen.add(kernel_key(r))
            rows.append({**r, "half": half})
        halves.append(rows)
    pairs = itertools.zip_longest(*halves)
    return [r for pair in pairs for r in pair if r is not None]


def _tensor(spec: Any, device: str, gen: Any) -> Any:
    """A traced tensor's layout filled with N(0, 1/16) values, drawn on ``device`` itself
    (the suite's inputs are drawn on the CPU and moved: half a second for a 60-GFLOP
    product's operands, more than its whole timing)."""
    import torch

    stride = spec.stride or torch.empty(spec.shape, device="meta").stride()
    flat = torch.randn(spec.storage_elements(), generator=gen, device=device) / 4
    return flat.to(spec.dtype).as_strided(spec.shape, stride)


def _setup(row: dict[str, Any], device: str) -> tuple[Any, ...]:
    """(args, kwargs, the operands ``matmul_into`` gets) of a traced call, built on
    ``device``."""
    import torch

    from opbench.spec.args import TensorSpec, parse_args

    parsed = parse_args(row["args"])
    gen = torch.Generator(device=device).manual_seed(0)
    build = lambda v: _tensor(v, device, gen) if isinstance(v, TensorSpec) else v  # noqa: E731
    call = [build(v) for v in parsed.args]
    kw = {k: build(v) for k, v in parsed.kwargs.items()}
    return call, kw, operands(row["op"], call, kw)


def kernel_key(row: dict[str, Any]) -> tuple:
    """What the kernels see of a product: the op's bias, element size, sizes and the
    operands' layouts (two traced calls with one key time the same)."""
    from opbench.spec.args import TensorSpec, parse_args

    specs = [(v.shape, v.stride) for v in parse_args(row["args"]).args
             if isinstance(v, TensorSpec)]  # fmt: skip
    return (row["op"].split(".")[0], row["itemsize"], row["batch"], row["M"], row["N"],
            row["K"], tuple(specs))  # fmt: skip


def _kernels(row: dict[str, Any], served_only: bool) -> list[tuple[str, Any]]:
    """What gets timed on a product besides eager: the served path and the tables, or
    the served path and the candidates the row's ``timed`` (an earlier sweep's names,
    ``--skip-from``) does not hold."""
    variants = [("variant", name) for name in VARIANTS]
    if SMALL_ONLY[0]:  # the small-product rule's candidates; its tables are the served path
        small = small_candidates(row["batch"], row["M"], row["N"], row["K"])
        done = set(row.get("timed", ()))
        return [("served", None), *variants,
                *(c for c in small if c[0] != "tables" and time_key(*c) not in done)]  # fmt: skip
    if served_only:
        return [("served", None), ("tables", None), *variants]
    if "timed" not in row:
        return [("served", None), *variants,
                *candidates(row["batch"], row["M"], row["N"], row["K"])]  # fmt: skip
    done = set(row["timed"])
    return [("served", None), *variants, *[(k, c) for k, c in candidates(
        row["batch"], row["M"], row["N"], row["K"]) if time_key(k, c) not in done]]  # fmt: skip


def _warm_one(task: tuple[dict[str, Any], bool, dict[str, list[str]], bool]) -> str:
    """Compile (into Triton's disk cache) every candidate of one product: run each once."""
    row, served_only, variants, small = task
    VARIANTS.update(variants)
    SMALL_ONLY[0] = small
    errors = []
    _, _, ops = _setup(row, "cuda")
    for kind, cfg in _kernels(row, served_only):
        try:
            with variant_context(cfg if kind == "variant" else None):
                run_candidate(kind, cfg, ops)
        except Exception as e:  # timed (and reported) again in the parent
            errors.append(f"{row['op']} {kind} {cfg}: {type(e).__name__}: {str(e)[:100]}")
    return "\n".join(errors)


def warm(rows: list[dict[str, Any]], jobs: int, served_only: bool = False) -> None:
    """Compile every candidate of ``rows`` in ``jobs`` processes at once, a product a task
    (a compile is 1-2 s; the timings then find them in Triton's disk cache)."""
    import multiprocessing

    if jobs <= 1 or not rows:
        return
    t0 = time.time()
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        tasks = [(r, served_only, dict(VARIANTS), SMALL_ONLY[0]) for r in rows]
        for i, err in enumerate(pool.imap_unordered(_warm_one, tasks)):
            if err:
                print(f"  warm-up: {err}", flush=True)
            if i % 100 == 0:
                print(f"  warm-up {i}/{len(rows)} {time.time() - t0:.0f}s", flush=True)


def time_product(
    row: dict[str, Any], device: str, bench: Any, served_only: bool = False
) -> dict[str, Any]:
    """Eager, the served path and every candidate on one product: ms each (``inf`` where
    it failed, declined or disagreed with eager), with the operands' layouts."""
    call, kw, ops = _setup(row, device)
    out, a, b = ops[:3]
    want = reference(row["op"], call, kw).reshape(out.shape).float()
    res: dict[str, Any] = {"layout": f"{layout_key(a)}{layout_key(b)}",
                           "bias": ops[3] is not None, "times": {}, "errors": {}}  # fmt: skip
    res["times"]["eager"] = bench(lambda: reference(row["op"], call, kw))
    for kind, cfg in _kernels(row, served_only):
        name = candidate_name(kind, cfg)
        with variant_context(cfg if kind == "variant" else None):
            _time_candidate(res, name, kind, cfg, ops, want, bench)
    return res


def _time_candidate(res: dict[str, Any], name: str, kind: str, cfg: Any, ops: tuple,
                    want: Any, bench: Any) -> None:  # fmt: skip
    """One candidate's time into ``res`` (``inf`` and the reason where it declined, failed
    or disagreed with eager)."""
    out = ops[0]
    try:
        out.fill_(math.nan)
        if not run_candidate(kind, cfg, ops):
            res["times"][name] = math.inf
            res["errors"][name] = "declined"
        elif not agrees(out, want):
            res["times"][name] = math.inf
            res["errors"][name] = "wrong result"
        else:
            res["times"][name] = bench(lambda: run_candidate(kind, cfg, ops))
    except Exception as e:  # shared memory, registers: this candidate only
        res["times"][name] = math.inf
        res["errors"][name] = f"{type(e).__name__}: {str(e)[:120]}"


def variant_summary(rows: list[dict[str, Any]], noise: float = 0.03) -> list[str]:
    """Markdown lines: each variant against the served path, per half, the geomean of
    served time over the variant's on the products it moved by more than ``noise`` (a
    setting that changes no launch still reads a few percent either way) and on the
    rest; the tuning half decides."""
    from opbench.report.means import geomean

    lines = ["| variant | half | products | moved | geomean served / variant (moved) | "
             "rest |", "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    names = sorted({k[len("served@"):-1] for r in rows for k in r["times"]
                    if k.startswith("served@")})  # fmt: skip
    for name in names:
        for half in ("tuning", "heldout"):
            ratios = [r["times"]["served:"] / r["times"][f"served@{name}:"] for r in rows
                      if r["half"] == half and math.isfinite(r["times"].get("served:", math.inf))
                      and math.isfinite(r["times"].get(f"served@{name}:", math.inf))]  # fmt: skip
            moved = [x for x in ratios if abs(x - 1) > noise]
            rest = [x for x in ratios if abs(x - 1) <= noise]
            fmt = lambda xs: f"{geomean(xs):.3f}" if xs else "-"  # noqa: E731
            lines.append(f"| {name} | {half} | {len(ratios)} | {len(moved)} | {fmt(moved)} | "
                         f"{fmt(rest)} |")  # fmt: skip
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="../shared/traces")
    ap.add_argument("--out", required=True, help="JSON lines, appended")
    ap.add_argument("--min-gflop", type=float, default=1.0)
    ap.add_argument("--max-gflop", type=float, default=math.inf,
                    help="only products under this (the rule's domain below MIN_FLOP)")  # fmt: skip
    ap.add_argument("--limit", type=int, default=100000, help="traced calls per op, as judged")
    ap.add_argument("--served-only", action="store_true",
                    help="eager, what the entry points serve and the tables, no candidates")  # fmt: skip
    ap.add_argument("--jobs", type=int, default=14, help="compiling processes")
    ap.add_argument(
        "--timing",
        choices=["device", "do_bench"],
        default="device",
        help="device: the judge's device-time protocol (matmul_timing.device_bench); "
        "do_bench: triton.testing.do_bench, host launch included where it is long",
    )
    ap.add_argument("--warmup-ms", type=float, default=2, help="with --timing do_bench")
    ap.add_argument("--rep-ms", type=float, default=8, help="with --timing do_bench")
    ap.add_argument("--budget", type=float, default=480, help="start no product after this (s)")
    ap.add_argument("--resume", action="store_true", help="skip products already in --out")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--variant", action="append", default=[],
                    metavar="NAME=MODULE.NAME=VALUE[,MODULE.NAME=VALUE]",
                    help="also time the served path under these settings (repeatable)")  # fmt: skip
    ap.add_argument("--small", action="store_true",
                    help="time only the served path and the small-product rule's candidates")  # fmt: skip
    ap.add_argument("--max-products", type=int, default=None, help="the first N (a smoke test)")
    ap.add_argument("--skip-from", action="append", default=[],
                    help="an earlier sweep (again for more: they are merged as matmul_rule.py "
                    "merges them): time only the candidates it lacks")  # fmt: skip
    opt = ap.parse_args()
    for item in opt.variant:
        name, sep, settings = item.partition("=")
        if not sep or not settings or "." in name:
            ap.error(f"--variant {item!r}: NAME=MODULE.NAME=VALUE[,MODULE.NAME=VALUE]")
        VARIANTS[name] = settings.split(",")
    SMALL_ONLY[0] = opt.small
    started = time.time()
    rows = [r for r in products(opt.traces, opt.min_gflop, opt.limit) if r["gflop"] < opt.max_gflop]
    rows = rows[: opt.max_products]
    path = Path(opt.out)
    done = set()
    if opt.resume and path.exists():
        done = {(d["half"], d["op"], d["args"]) for d in map(json.loads, path.open())}
    rows = [r for r in rows if (r["half"], r["op"], r["args"]) not in done]
    if opt.skip_from:
        from matmul_rule import merge_sweeps

        old = {(r["half"], r["op"], r["args"]): r["times"] for r in merge_sweeps(opt.skip_from)}
        for r in rows:
            r["timed"] = sorted(old.get((r["half"], r["op"], r["args"]), {}))
        # only the products with a candidate left to time, and only those candidates
        rows = [r for r in rows if len(_kernels(r, False)) > 1]
    print(f"{len(rows)} products to time ({len(done)} already in {path})", flush=True)
    if opt.device == "cuda":
        import torch
        import triton

        warm(rows, opt.jobs, opt.served_only)
        meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                "triton": triton.__version__, "timing": opt.timing}  # fmt: skip

        def bench(fn: Any) -> float:
            if opt.timing == "device":
                return device_bench(fn)
            return float(triton.testing.do_bench(fn, warmup=opt.warmup_ms, rep=opt.rep_ms,
                                                 return_mode="median"))  # fmt: skip
    else:  # the interpreter: results checked, nothing timed
        meta = {"gpu": None}

        def bench(fn: Any) -> float:
            fn()
            return 1.0

    print(f"compiled in {time.time() - started:.0f}s", flush=True)
    with path.open("a") as f:
        for i, r in enumerate(rows):
            if time.time() - started > opt.budget:
                print(f"budget spent: {len(rows) - i} products left (--resume)", flush=True)
                break
            res = time_product(r, opt.device, bench, opt.served_only)
            r.pop("timed", None)
            f.write(json.dumps({**r, **res, **meta}) + "\n")
            f.flush()
            t = res["times"]
            best = min((v, k) for k, v in t.items() if k != "eager")
            print(f"{i:4d} {r['half'][:4]} {r['op'][:6]} {r['batch']}x{r['M']}x{r['N']}x{r['K']} "
                  f"{res['layout']} eager {t['eager']:.4f} served {t['served:']:.4f} "
                  f"best {best[0]:.4f} {best[1]}", flush=True)  # fmt: skip
    print(f"done in {time.time() - started:.0f}s", flush=True)
    if VARIANTS:
        print("\n".join(variant_summary([json.loads(line) for line in path.open()])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
