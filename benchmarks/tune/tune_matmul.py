"""Tune the reference backend's matmul kernel ahead of time, per shape bucket, on the GPU.

The traces hold 1,729 distinct ``mm``/``addmm``/``bmm`` rows (172 buckets of
:func:`opbench.kernels._lib.matmul.bucket`: element size and the size classes of M, N and
K). Buckets go in order of traced GPU time (:func:`traced_time`); for each, the
``--per-bucket`` most used shapes (count summed over the trace
files), and the one with the most traced GPU time (:func:`picked`), are timed with every
candidate configuration that fits them, exactly as the kernel is called (the traced
operands, strides included, through ``matmul_into``), and the configuration with the
lowest geomean time, weighted by each shape's traced GPU time, wins. Eager (cuBLAS) is timed on
the same shapes beside it, so the table shows what tuning bought and where we stand.

Compiles are shared: the kernel's integers and strides are not specialised, so one
compile per configuration, dtype and epilogue serves every shape (about 2 s each on an
H100). Every measurement is appended to ``--journal`` at once and a rerun skips what is
there, so a tuning cut off by a device call's 10-minute limit goes on in the next call.
Timing: ``triton.testing.do_bench`` (L2 cleared before each repetition, median).

Outputs: with ``--write`` the winners go to ``src/opbench/kernels/_lib/matmul_configs.py``
(the table the kernel reads; device, versions and this command in its header), and
``--out`` gets a JSON and a markdown table per bucket: shapes, chosen configuration, its
time against the untuned default and against eager.

``--shapes`` times the judged products themselves (each op's 8 most used traced cases of
1 GFLOP or more): eager, the configuration the kernel picks now, and
:func:`shape_candidates` (Hopper tiles, split-K where tiles leave SMs idle), compiling in
``--jobs`` processes first; ``--write`` puts each product's fastest into
``matmul_configs.SHAPES``, which the kernel reads before the buckets. Products come from
the tuning half of the traces only (:mod:`opbench.suites.trace_split`); the report then
times the held-out half's judged products with what the kernel serves them after this
tuning (:func:`heldout_products`) and puts them beside the tuning half, so a pick that
only fits its own rows shows the day it is made. The bucket tuning's ``--report`` does the
same for the buckets it covers (``--heldout-per-bucket`` shapes each, 2 by default).

Usage (on the GPU machine, after ``source benchmarks/common/gpu_env.sh``; traces in
``.gpu_data/traces``):
    python3 benchmarks/tune/tune_matmul.py --shapes --traces .gpu_data/traces --jobs 12 --write \\
        --out $OUT/matmul-shapes-h100
    python3 benchmarks/tune/tune_matmul.py --traces .gpu_data/traces --budget 500 \\
        --journal .gpu_data/runs/tune-mm.jsonl
    python3 benchmarks/tune/tune_matmul.py --traces .gpu_data/traces --journal \\
        .gpu_data/runs/tune-mm.jsonl --report --write --out benchmarks/results/matmul-tuning-h100

The traced rows, their operands and PyTorch's answer for them are
``benchmarks/tune/matmul_rows.py``'s; timing one call with a configuration is
``matmul_timing.py``'s and the held-out half of the reports ``matmul_heldout.py``'s; this
file picks and keeps.

Writes into ``src/``: ``src/opbench/kernels/_lib/matmul_configs.py`` (``--write``: ``CONFIGS``
per bucket, ``SHAPES`` per judged product). Committed results beside it:
``benchmarks/results/matmul-tuning-h100.md``/``.json`` (the bucket tuning, last command) and
``matmul-shapes-h100-2026-11-26.md``/``.json`` (``--shapes``, the run behind ``SHAPES``).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from matmul_heldout import (  # noqa: E402
    add_heldout,
    heldout_bucket_lines,
    heldout_buckets,
    heldout_lines,
    heldout_products,
)
from matmul_rows import (  # noqa: E402  (the traced rows and their operands)
    REPO,
    judged_products,
    operands,
    picked,
    reference,
    shapes_from_traces,
    traced_time,
)
from matmul_timing import agrees, bench, measure_shape, warm  # noqa: E402

from opbench.report.means import geomean, geomean_of_timed  # noqa: E402

CONFIGS_PY = REPO / "src/opbench/kernels/_lib/matmul_configs.py"

#: Candidates (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages): the shapes
#: Inductor and the Triton tutorials use on Hopper for 16-bit operands, and smaller tiles
#: for IEEE float32 (FMAs, register-bound).
CANDIDATES_16 = [
    (128, 256, 64, 8, 8, 3), (256, 128, 64, 8, 8, 3), (128, 128, 64, 8, 8, 3),
    (128, 128, 64, 8, 4, 4), (128, 128, 32, 8, 4, 4), (128, 64, 64, 8, 4, 4),
    (128, 128, 64, 8, 8, 4), (64, 256, 64, 8, 8, 3),
    (64, 128, 64, 8, 4, 4), (64, 64, 64, 8, 4, 4), (64, 64, 32, 8, 2, 5),
    (32, 128, 64, 8, 4, 4), (16, 128, 128, 8, 4, 3), (16, 64, 128, 8, 4, 4),
    (128, 32, 64, 8, 4, 4), (32, 32, 64, 8, 2, 4), (16, 16, 64, 8, 2, 3),
    # K of 16 or less (attention's per-head products over 6-16 features): every tile
    # above was too deep to fit, and the default ran them at 0.09x cuBLAS (bucket 2:0:0:0)
    (16, 16, 16, 8, 2, 2), (32, 32, 16, 8, 2, 3), (64, 64, 16, 8, 4, 3),
]  # fmt: skip
CANDIDATES_32 = [
    (64, 64, 32, 8, 4, 3), (64, 64, 16, 8, 4, 4), (128, 64, 32, 8, 8, 3),
    (64, 128, 32, 8, 8, 3), (32, 64, 32, 8, 4, 3), (32, 32, 32, 8, 2, 3),
    (16, 64, 32, 8, 2, 3),
]  # fmt: skip


def _p2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def fits(cfg: tuple[int, ...], M: int, N: int, K: int) -> bool:
    """A tile no larger than the problem (rounded up to a power of two, at least 16):
    a 128-row tile on a 16-row problem only wastes work."""
    bm, bn, bk = cfg[:3]
    return bm <= max(16, _p2(M)) and bn <= max(16, _p2(N)) and bk <= max(16, _p2(K))


#: Candidates of ``--shapes`` (the traced products of a GFLOP or more): the Hopper tiles
#: (wgmma's 64-row warpgroup slices, N of 64-256), with 4 or 8 warps and 3-4 stages. With
#: a bias they no longer spill (sm_90: every tile of 128x128 or more did, 255 registers,
#: until the bias vector was loaded once per tile), so the bucket tuning's small tiles
#: for the addmm buckets need timing again.
SHAPE_CANDIDATES = [
    (128, 256, 64, 8, 8, 3), (128, 256, 64, 8, 8, 4), (256, 128, 64, 8, 8, 3),
    (128, 128, 64, 8, 8, 3), (128, 128, 64, 8, 8, 4), (128, 128, 128, 8, 8, 3),
    (128, 128, 64, 8, 4, 3), (128, 128, 64, 8, 4, 4), (64, 256, 64, 8, 8, 3),
    (128, 64, 64, 8, 4, 4), (64, 128, 64, 8, 4, 4), (64, 64, 64, 8, 4, 4),
]  # fmt: skip
#: Split-K on a 128x128 tile for products whose tiles leave SMs idle (a weight gradient
#: of 768x768 over K = 8192 is 36 tiles on 132 SMs): (tile, programs along K)
SPLIT_TILE = (128, 128, 64, 8, 8, 3)
SPLITS = (2, 3, 4, 6)


def shape_candidates(batch: int, M: int, N: int, K: int, sms: int = 132) -> list[tuple[int, ...]]:
    """The configurations ``--shapes`` times on one product: :data:`SHAPE_CANDIDATES`
    that fit it, and :data:`SPLIT_TILE` split ``s`` ways where its tiles times ``s``
    stay within two waves and each program keeps 8 or more K blocks."""
    out = [c for c in SHAPE_CANDIDATES if fits(c, M, N, K)]
    bm, bn, bk = SPLIT_TILE[:3]
    tiles = batch * -(-M // bm) * -(-N // bn)
    for s in SPLITS:
        if tiles * s <= 2 * sms and K // bk >= 8 * s:
            out.append((*SPLIT_TILE, s))
    return out


def _compile_key(row: dict[str, Any], cfg: tuple[int, ...]) -> tuple[Any, ...]:
    """What decides the compiled kernel of a timing (roughly: op, which strides are 1, the
    tile, split or not), so the warm-up compiles each kernel once."""
    layout = re.sub(r"\b(?!1\b)\d+\b", "#", row["args"])
    return row["op"], layout, cfg[:6], len(cfg) > 6 and cfg[6] > 1


def tune_shapes(args: argparse.Namespace) -> None:
    """``--shapes``: time eager, the configuration the kernel picks now and every
    :func:`shape_candidates` on each judged product of ``--min-gflop`` or more; report
    them and, with ``--write``, put each product's fastest into ``SHAPES``."""
    started = time.monotonic()
    rows = judged_products(args.traces, args.min_gflop, args.limit)
    from opbench.kernels._lib import matmul

    plan = []
    for r in rows:
        current = tuple(matmul.config_for(r["itemsize"], r["M"], r["N"], r["K"], r["batch"]))
        cands = [current] + [c for c in shape_candidates(r["batch"], r["M"], r["N"], r["K"])
                             if c != current]  # fmt: skip
        plan.append((r, current, cands))
    seen, tasks = set(), []
    for r, _, cands in plan:
        for c in cands:
            if _compile_key(r, c) not in seen:
                seen.add(_compile_key(r, c))
                tasks.append((r["op"], r["args"], c))
    print(f"{len(rows)} products, {sum(len(p[2]) for p in plan)} timings, {len(tasks)} "
          f"kernels to compile", flush=True)  # fmt: skip
    warm(tasks, args.jobs)
    print(f"[{time.monotonic() - started:5.0f}s] compiled", flush=True)
    results = []
    for r, current, cands in plan:
        times = measure_shape(r, cands)

        def ms(c: tuple[int, ...], times: dict[str, float] = times) -> float:
            return times[json.dumps(list(c))]

        best = min(cands, key=ms)
        results.append({**r, "eager_ms": times["eager"], "current": list(current),
                        "current_ms": ms(current), "best": list(best), "best_ms": ms(best),
                        "times": times})  # fmt: skip
        print(f"[{time.monotonic() - started:5.0f}s] {r['op']} b{r['batch']} {r['M']}x{r['N']}x"
              f"{r['K']}: eager {times['eager']:.4f} current {list(current)} {ms(current):.4f} "
              f"best {list(best)} {ms(best):.4f}", flush=True)  # fmt: skip
    chosen = shape_report(args, results)
    heldout = heldout_products(args, chosen)
    add_heldout(args.out, heldout, heldout_lines(heldout))


def shape_report(
    args: argparse.Namespace, results: list[dict[str, Any]]
) -> dict[tuple[int, ...], tuple[int, ...]]:
    """The ``--shapes`` table (``--out``.json/.md), the chosen configuration per product
    (the lowest geomean over the cases of one (itemsize, batch, M, N, K), which may
    differ in layout) and, with ``--write``, those in ``matmul_configs.SHAPES``; returns
    the chosen ones."""
    from opbench.run.machine import environment

    env = environment("cuda")
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
    by_key: dict[tuple[int, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        by_key[(r["itemsize"], r["batch"], r["M"], r["N"], r["K"])].append(r)
    chosen = {}
    for key, rs in by_key.items():
        names = set.intersection(*(set(r["times"]) for r in rs)) - {"eager"}
        scored = {n: geomean([r["times"][n] for r in rs]) for n in names}
        chosen[key] = tuple(json.loads(min(scored, key=scored.get)))
    for r in results:
        pick = json.dumps(list(chosen[(r["itemsize"], r["batch"], r["M"], r["N"], r["K"])]))
        r["chosen"], r["chosen_ms"] = json.loads(pick), r["times"][pick]
    summary = {
        "products": len(results),
        "current_vs_eager": geomean([r["eager_ms"] / r["current_ms"] for r in results]),
        "best_vs_eager": geomean([r["eager_ms"] / r["best_ms"] for r in results]),
        "chosen_vs_eager": geomean([r["eager_ms"] / r["chosen_ms"] for r in results]),
    }
    print(json.dumps(summary), flush=True)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(
            {"env": env, "command": command, "summary": summary, "products": results},
            indent=1) + "\n")  # fmt: skip
        lines = [
            f"# Matmul configurations per traced product on {env.get('gpu')}", "",
            f"torch {env.get('torch')}, Triton {env.get('triton')}. Command: `{command}`. "
            "Median ms by `triton.testing.do_bench` (L2 cleared); `vs eager` above 1 is "
            "faster than cuBLAS; `chosen`: the fastest over the cases of one product.", "",
            f"Summary: `{json.dumps(summary)}`", "",
            "| op | batch x M x N x K | GFLOP | eager ms | current | ms | vs eager | chosen "
            "| ms | vs eager | 2nd fastest here, ms |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]  # fmt: skip
        for r in results:
            ranked = sorted((t, n) for n, t in r["times"].items() if n != "eager")
            second = ranked[1] if len(ranked) > 1 else (math.nan, "")
            lines.append(
                f"| {r['op']} | {r['batch']}x{r['M']}x{r['N']}x{r['K']} | {r['gflop']:.2f} | "
                f"{r['eager_ms']:.4f} | {r['current']} | {r['current_ms']:.4f} | "
                f"{r['eager_ms'] / r['current_ms']:.3f} | {r['chosen']} | {r['chosen_ms']:.4f} | "
                f"{r['eager_ms'] / r['chosen_ms']:.3f} | {second[1]} {second[0]:.4f} |"
            )  # fmt: skip
        out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    if args.write:
        shapes = {**read_configs(CONFIGS_PY)["SHAPES"], **chosen}
        write_configs(CONFIGS_PY, shapes=shapes, shapes_on=f"{env.get('gpu')}, torch "
                      f"{env.get('torch')}, Triton {env.get('triton')}: {command}")  # fmt: skip
    return chosen


def _journal(path: Path) -> dict[tuple[str, str], float]:
    """Measurements so far: (call, configuration) -> ms."""
    from opbench.run.journal import read_records

    try:
        recs = read_records(path, "tuning journal", lambda r: (r["args_key"], r["config"]),
                            required=("ms",))  # fmt: skip
    except ValueError as e:
        raise SystemExit(str(e)) from None
    return {k: r["ms"] for k, r in recs.items()}


def tune(args: argparse.Namespace) -> None:
    journal = Path(args.journal)
    journal.parent.mkdir(parents=True, exist_ok=True)
    done = _journal(journal)
    buckets = shapes_from_traces(args.traces)
    started = time.monotonic()
    picks = {key: picked(rows, args.per_bucket) for key, rows in buckets.items()}
    total = sum(len(r) for r in picks.values())
    seen = 0
    # the buckets with the most traced GPU time first, so a cut-off tuning has the ones
    # that matter
    order = sorted(buckets, key=lambda k: -sum(map(traced_time, buckets[k])))
    for key in order:
        for row in picks[key]:
            seen += 1
            if time.monotonic() - started > args.budget:
                print(f"budget spent after {seen - 1} of {total} shapes", flush=True)
                return
            measure(key, row, done, journal)
            print(f"[{time.monotonic() - started:5.0f}s] {seen}/{total} {key} {row['op']} "
                  f"M={row['M']} N={row['N']} K={row['K']}", flush=True)  # fmt: skip


def measure(key: str, row: dict[str, Any], done: dict[tuple[str, str], float],
            journal: Path) -> None:  # fmt: skip
    """Time one traced call with eager, the untuned default and every candidate that
    fits it; append each new measurement to the journal."""

    from opbench.kernels._lib import matmul
    from opbench.run.journal import append_record
    from opbench.spec.args import parse_args
    from opbench.suites.inputs import make_inputs

    op, text = row["op"], row["args"]
    call, kw = make_inputs(op, parse_args(text), "cuda", 0)
    out, a, b, bias, alpha, beta = operands(op, call, kw)
    itemsize = a.element_size()
    M, N, K = row["M"], row["N"], row["K"]
    todo: dict[str, tuple[int, ...] | None] = {
        "eager": None,
        "default": matmul._default(itemsize, M, N),
    }
    for c in CANDIDATES_32 if itemsize == 4 else CANDIDATES_16:
        if fits(c, M, N, K):
            todo[json.dumps(list(c))] = c
    want = reference(op, call, kw).reshape(out.shape).float()
    for name, cfg in todo.items():
        if (f"{op}|{text}", name) in done:
            continue
        if cfg is None:
            fn = lambda: reference(op, call, kw)  # noqa: E731
        else:
            fn = lambda c=cfg: matmul.matmul_into(out, a, b, bias, alpha, beta, c)  # noqa: E731
        try:
            ms = bench(fn)
            if cfg is not None and not agrees(out, want):
                print(f"  {key} {name}: WRONG RESULT (not eligible)", flush=True)
                ms = math.inf
        except Exception as e:  # a configuration that does not compile (shared memory)
            print(f"  {key} {name}: {type(e).__name__}: {str(e)[:100]}", flush=True)
            ms = math.inf
        rec = {"bucket": key, "op": op, "args_key": f"{op}|{text}", "weight": row["weight"],
               "M": M, "N": N, "K": K, "batch": row.get("batch", 1), "config": name,
               "ms": ms}  # fmt: skip
        append_record(journal, rec)
        done[(rec["args_key"], name)] = ms


def report(args: argparse.Namespace) -> None:
    rows = [json.loads(x) for x in Path(args.journal).read_text().splitlines() if x.strip()]
    by_bucket: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        # weighted by traced GPU time, so a bucket's heavy products count for what they
        # cost and not only by how often they were called
        by_bucket[r["bucket"]].setdefault(r["args_key"], {"w": traced_time(r), "t": {}, "r": r})
        by_bucket[r["bucket"]][r["args_key"]]["t"][r["config"]] = r["ms"]

    def wgeo(shapes: list[dict[str, Any]], name: str) -> float | None:
        pts = [(s["w"], s["t"].get(name)) for s in shapes]
        if any(t is None or not math.isfinite(t) for _, t in pts):
            return None
        total = sum(w for w, _ in pts)
        return math.exp(sum(w * math.log(t) for w, t in pts) / total)

    table, tuned = [], {}
    for key in sorted(by_bucket):
        shapes = list(by_bucket[key].values())
        names = set.intersection(*(set(s["t"]) for s in shapes)) - {"eager"}
        scored = {n: wgeo(shapes, n) for n in names}
        scored = {n: v for n, v in scored.items() if v is not None}
        if not scored:
            continue
        best = min(scored, key=scored.get)
        eager, default = wgeo(shapes, "eager"), scored.get("default")
        if best != "default":
            tuned[key] = tuple(json.loads(best))
        table.append({"bucket": key, "shapes": [f"{s['r']['op']} {s['r']['M']}x{s['r']['N']}x"
                                                 f"{s['r']['K']}" for s in shapes],
                      "best": best, "best_ms": scored[best], "default_ms": default,
                      "eager_ms": eager, "vs_eager": eager / scored[best] if eager else None,
                      "default_vs_eager": eager / default if eager and default else None})  # fmt: skip
    from opbench.run.machine import environment

    env = environment("cuda")
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
    summary = {
        "buckets": len(table),
        "tuned_buckets": len(tuned),
        "geomean_vs_eager_tuned": geomean_of_timed(t["vs_eager"] for t in table),
        "geomean_vs_eager_default": geomean_of_timed(t["default_vs_eager"] for t in table),
    }
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(
            json.dumps(
                {"env": env, "command": command, "summary": summary, "buckets": table}, indent=1
            )
            + "\n"  # fmt: skip
        )
        lines = [
            f"# Matmul tuning on {env.get('gpu')}",
            "",
            f"torch {env.get('torch')}, Triton {env.get('triton')}. Command: `{command}`. "
            "Times: median ms by `triton.testing.do_bench` (L2 cleared), weighted geomean over "
            "a bucket's most used traced shapes; `vs eager` above 1 is faster than cuBLAS.",
            "",
            f"Summary: `{json.dumps(summary)}`",
            "",
            "| bucket | shapes | chosen | ms | default ms | eager ms | vs eager | default vs eager |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for t in table:
            lines.append(
                f"| {t['bucket']} | {'; '.join(t['shapes'])} | {t['best']} | {t['best_ms']:.4f} | "
                f"{t['default_ms'] or float('nan'):.4f} | {t['eager_ms'] or float('nan'):.4f} | "
                f"{t['vs_eager'] or float('nan'):.2f} | {t['default_vs_eager'] or float('nan'):.2f} |"
            )
        out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    if args.write:
        write_configs(CONFIGS_PY, tuned=tuned, tuned_on=f"{env.get('gpu')}, torch "
                      f"{env.get('torch')}, Triton {env.get('triton')}: {command}")  # fmt: skip
    print(json.dumps(summary))
    if args.heldout_per_bucket > 0:
        heldout = heldout_buckets(args, [t["bucket"] for t in table], tuned)
        add_heldout(args.out, heldout, heldout_bucket_lines(heldout))


CONFIGS_TEMPLATE = '''"""Matmul configurations per shape bucket, tuned ahead of time on the GPU.

Written by ``benchmarks/tune/tune_matmul.py``; rerun it rather than editing by hand. Keys are
:func:`opbench.kernels._lib.matmul.bucket` strings (element size and the size classes of
M, N and K); values are (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages).
Buckets missing here use the kernel's untuned defaults (also where a default won).
``SHAPES`` holds configurations of exact products, ``(itemsize, batch, M, N, K)``, timed
on those traced shapes (``tune_matmul.py --shapes``) and checked before the buckets; a
seventh value, where present, is the number of programs along K (split-K).
"""

#: where and by what command TUNED was measured
TUNED_ON = {tuned_on}

TUNED: dict[str, tuple[int, int, int, int, int, int]] = {{
{tuned}}}

#: where and by what command SHAPES was measured
SHAPES_ON = {shapes_on}

SHAPES: dict[tuple[int, int, int, int, int], tuple[int, ...]] = {{
{shapes}}}
'''


def read_configs(path: Path) -> dict[str, Any]:
    """The tables (and their provenance) a configuration module holds now; empty where
    it has none."""
    ns: dict[str, Any] = {}
    if path.exists():
        exec(compile(path.read_text(), str(path), "exec"), ns)  # our own generated module
    return {"TUNED": ns.get("TUNED", {}), "TUNED_ON": ns.get("TUNED_ON", ""),
            "SHAPES": ns.get("SHAPES", {}), "SHAPES_ON": ns.get("SHAPES_ON", "")}  # fmt: skip


def write_configs(
    path: Path,
    tuned: dict[str, tuple[int, ...]] | None = None,
    tuned_on: str | None = None,
    shapes: dict[tuple[int, ...], tuple[int, ...]] | None = None,
    shapes_on: str | None = None,
) -> None:
    """Rewrite the kernel's configuration table (a Python module: kernels never read data
    files, the static scan flags that), replacing the tables given and keeping the other
    as it is."""
    old = read_configs(path)
    tuned = old["TUNED"] if tuned is None else tuned
    shapes = old["SHAPES"] if shapes is None else shapes
    path.write_text(CONFIGS_TEMPLATE.format(
        tuned_on=json.dumps(old["TUNED_ON"] if tuned_on is None else tuned_on),
        shapes_on=json.dumps(old["SHAPES_ON"] if shapes_on is None else shapes_on),
        tuned="".join(f"    {json.dumps(k)}: {tuple(v)!r},\n" for k, v in sorted(tuned.items())),
        shapes="".join(f"    {tuple(k)!r}: {tuple(v)!r},\n" for k, v in sorted(shapes.items())),
    ))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--traces", default="../shared/traces")
    ap.add_argument("--journal", help="JSONL of measurements (resumable; not with --shapes)")
    ap.add_argument("--per-bucket", type=int, default=3, help="most used shapes per bucket")
    ap.add_argument("--budget", type=float, default=500, help="start no shape after this (s)")
    ap.add_argument("--report", action="store_true", help="choose and write from the journal")
    ap.add_argument(
        "--shapes",
        action="store_true",
        help="time candidates on the judged products themselves (no journal)",
    )
    ap.add_argument("--min-gflop", type=float, default=1.0, help="with --shapes: smallest product")
    ap.add_argument("--limit", type=int, default=8, help="with --shapes: cases per op, as judged")
    ap.add_argument("--jobs", type=int, default=8, help="with --shapes: compiling processes")
    ap.add_argument(
        "--write", action="store_true", help="with --report or --shapes: rewrite matmul_configs.py"
    )
    ap.add_argument("--out", default=None, help="with --report or --shapes: OUT.json, OUT.md")
    ap.add_argument("--heldout-per-bucket", type=int, default=2,
                    help="with --report: held-out shapes timed per bucket (0: none)")  # fmt: skip
    args = ap.parse_args()
    if args.shapes:
        tune_shapes(args)
    elif args.journal is None:
        ap.error("--journal is required without --shapes")
    elif args.report:
        report(args)
    else:
        tune(args)


if __name__ == "__main__":
    main()
