"""The traced matmuls the pointer kernel loses (issue #13) timed three ways on the GPU:
eager (cuBLAS), ``matmul.matmul_into`` with its current configuration, and
``matmul_tma.tma_matmul_into`` over a small sweep of configurations (at most 8 a
product). Every result is checked against eager first (max abs error over the output's
largest magnitude, 2e-2); a configuration that fails the check, cannot compile (shared
memory) or is declined does not count. Times are ``triton.testing.do_bench`` medians
(L2 flushed between calls, as tune_matmul.py), plus each path's host time per call
(``--host``: 200 calls back to back without a sync, so the launch path alone).

Prints a markdown table and a JSON summary (best TMA configuration per product, geomean
of eager/ours over the products for the current kernel, the best TMA one, and the better
of the two per product); ``--json PATH`` writes the summary there too. Compiles run in
``--jobs`` processes first (each compile fills Triton's disk cache), so the run takes
well under 4 minutes.

Usage (on the GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/tune/tma_matmul_probe.py --json "$OUT/tma-probe.json"
A CPU smoke test under Triton's interpreter, shapes shrunk 16x (checks the script and
the results, not speed):
    TRITON_INTERPRET=1 python3 benchmarks/tune/tma_matmul_probe.py --smoke

Tunes ``src/``: its best TMA configuration per product is what
``src/opbench/kernels/_lib/matmul_tma_configs.py`` (``TMA_SHAPES``) holds, copied by hand
(products where TMA beat the pointer kernel). Committed result:
``benchmarks/results/tma-matmul-probe-h100-2026-11-26.json`` (the first command, at 61c2ddb:
geomean 0.741 -> 0.860 of eager over the 9 products).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from opbench.report.means import geomean_of_timed

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

#: (name, op, M, K, N, A stored [K, M], B stored [N, K]) of the traced products (float16);
#: addmm has a [N] bias, bmm a batch of 1. Eager/ours ms on the H100 before (issue #13):
#: 0.0210/0.0323, 0.0113/0.0167, 0.0294/0.0383, 0.0118/0.0169, 0.0112/0.0152,
#: 0.0223/0.0285, 0.0094/0.0123, 0.0129/0.0155, 0.0123/0.0154.
PRODUCTS = [
    ("mm 8192x768 @ 768x768", "mm", 8192, 768, 768, False, False),
    ("mm [768,2048]^T @ 2048x768", "mm", 768, 2048, 768, True, False),
    ("mm [768,8192]^T @ 8192x768", "mm", 768, 8192, 768, True, False),
    ("bmm [1,1024,2048]^T @ [1,2048,1024]", "bmm", 1024, 2048, 1024, True, False),
    ("addmm b[1536] + 512x1536 @ W^T 1536", "addmm", 512, 1536, 1536, False, True),
    ("addmm b[768] + 8192x768 @ W^T 768", "addmm", 8192, 768, 768, False, True),
    ("mm 1024x1024 @ 1024x1024", "mm", 1024, 1024, 1024, False, False),
    ("addmm b[1024] + 2048x1024 @ W^T 1024", "addmm", 2048, 1024, 1024, False, True),
    ("bmm [1,2048,1024] @ [1,1024,1024]", "bmm", 2048, 1024, 1024, False, False),
]  # fmt: skip

SMS = 132


def candidates(M: int, N: int, K: int) -> list[tuple[int, ...]]:
    """At most 8 configurations (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, stages[,
    splits]): the wgmma tiles, smaller tiles where 128x128 leaves SMs idle, and split-K
    to fill the GPU where even those do."""
    out = [(128, 128, 64, 8, 4, 4), (128, 256, 64, 8, 8, 3), (128, 128, 64, 8, 8, 4),
           (64, 128, 64, 8, 4, 5), (128, 64, 64, 8, 4, 5)]  # fmt: skip
    tiles = math.ceil(M / 128) * math.ceil(N / 128)
    k_iters = math.ceil(K / 64)
    if tiles >= SMS:
        out += [(256, 128, 64, 8, 8, 3), (128, 128, 64, 4, 4, 3), (64, 256, 64, 8, 8, 3)]
    else:
        for bm, bn in ((128, 128), (64, 128), (128, 64)):
            t = math.ceil(M / bm) * math.ceil(N / bn)
            s = min(max(1, round(SMS / t)), k_iters // 4)
            if s > 1 and len(out) < 8:
                out.append((bm, bn, 64, 8, 4, 4, s))
        for extra in ((64, 64, 64, 8, 4, 5), (128, 128, 64, 8, 4, 3)):
            if len(out) < 8:
                out.append(extra)
    return out[:8]


def make(name_op: tuple, device: str, shrink: int) -> tuple[Any, ...]:
    """(eager function, out, a, b, bias, alpha, beta) of a product, 3-D operands."""
    import torch

    _, op, M, K, N, a_t, b_t = name_op
    M, K, N = (max(8, n // shrink) for n in (M, K, N))
    g = torch.Generator().manual_seed(M * 31 + N)

    def r(*shape: int) -> torch.Tensor:
        return (torch.randn(shape, generator=g) / 4).to(device, torch.float16)

    a = r(K, M).t() if a_t else r(M, K)
    b = r(N, K).t() if b_t else r(K, N)
    bias = r(N) if op == "addmm" else None
    out = torch.empty(1, M, N, dtype=torch.float16, device=device)
    if op == "addmm":
        eager = lambda: torch.addmm(bias, a, b)  # noqa: E731
    elif op == "bmm":
        eager = lambda: torch.bmm(a[None], b[None])  # noqa: E731
    else:
        eager = lambda: torch.mm(a, b)  # noqa: E731
    x = bias.expand(1, M, N) if bias is not None else None
    return eager, out, a[None], b[None], x, 1.0, 1.0


def _warm_one(task: tuple[int, tuple[int, ...] | None]) -> str:
    """Compile (into Triton's disk cache) one product's kernel: run it once."""
    i, cfg = task
    try:
        from opbench.kernels._lib import matmul, matmul_tma

        _, out, a, b, x, alpha, beta = make(PRODUCTS[i], "cuda", 1)
        if cfg is None:
            matmul.matmul_into(out, a, b, x, alpha, beta)
        else:
            matmul_tma.tma_matmul_into(out, a, b, x, alpha, beta, cfg)
        return ""
    except Exception as e:  # reported again when timed
        return f"{PRODUCTS[i][0]} {cfg}: {type(e).__name__}: {str(e)[:120]}"


def warm(tasks: list, jobs: int) -> None:
    import multiprocessing

    if jobs <= 1:
        return
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        for err in pool.imap_unordered(_warm_one, tasks):
            if err:
                print(f"  warm-up: {err}", flush=True)


def _err(got: Any, want: Any) -> float:
    scale = max(float(want.abs().max()), 1.0)
    return float((got.float() - want.float()).abs().max()) / scale


def _host_us(fn: Any, n: int = 200) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--only", help="comma-separated product indices")
    ap.add_argument("--no-host", action="store_true", help="skip the host-time column")
    ap.add_argument("--smoke", action="store_true", help="CPU, interpreter, shapes / 16")
    args = ap.parse_args()

    device = "cpu" if args.smoke else "cuda"
    shrink = 16 if args.smoke else 1
    picks = [int(s) for s in args.only.split(",")] if args.only else range(len(PRODUCTS))
    plans = []
    for i in picks:
        _, _, M, K, N, _, _ = PRODUCTS[i]
        if args.smoke:
            cands = [(32, 32, 32, 4, 4, 1), (16, 32, 16, 2, 4, 1, 2)]
        else:
            cands = candidates(M, N, K)
        plans.append((i, cands))
    t_start = time.perf_counter()
    if not args.smoke:
        warm([(i, None) for i, _ in plans] + [(i, c) for i, cs in plans for c in cs], args.jobs)
        print(f"compiled in {time.perf_counter() - t_start:.0f} s", flush=True)

    if args.smoke:
        bench = lambda fn: float("nan")  # noqa: E731
    else:
        import triton

        def bench(fn: Any) -> float:
            return float(triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median"))

    rows = []
    for i, cands in plans:
        row = measure(i, cands, device, shrink, bench, args.smoke, not args.no_host)
        rows.append(row)
        print(_line(row), flush=True)
    summary = _summary(rows)
    print()
    print(_table(rows))
    print()
    print(json.dumps(summary, indent=1))
    print(f"total {time.perf_counter() - t_start:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    bad = [r["product"] for r in rows if r["current_err"] > 2e-2 or r["best"] is None]
    if bad:
        print("NOT OK:", bad)
        sys.exit(1)


def measure(
    i: int, cands: list, device: str, shrink: int, bench: Any, smoke: bool, host: bool
) -> dict[str, Any]:
    """One product's row: eager, the current kernel, every TMA candidate."""
    import torch  # noqa: F401

    from opbench.kernels._lib import matmul, matmul_tma

    name = PRODUCTS[i][0]
    eager, out, a, b, x, alpha, beta = make(PRODUCTS[i], device, shrink)
    want = eager().reshape(out.shape)
    row: dict[str, Any] = {"product": name, "eager_ms": bench(eager)}

    def cur() -> None:
        matmul.matmul_into(out, a, b, x, alpha, beta)

    cur()
    row["current_err"] = _err(out, want)
    row["current_ms"] = bench(cur)
    if not smoke and host:
        row["host_us"] = {"eager": _host_us(eager), "current": _host_us(cur)}
    row["tma"] = {}
    for cfg in cands:
        key = ",".join(map(str, cfg))

        def tma(cfg: tuple[int, ...] = cfg) -> bool:
            return matmul_tma.tma_matmul_into(out, a, b, x, alpha, beta, cfg)

        out.fill_(float("nan"))
        try:
            if not tma():
                row["tma"][key] = {"declined": True}
                continue
        except Exception as e:
            row["tma"][key] = {"error": f"{type(e).__name__}: {str(e)[:100]}"}
            continue
        err = _err(out, want)
        row["tma"][key] = {"err": err, "ms": bench(tma) if err <= 2e-2 else None}
    ok = {k: v["ms"] for k, v in row["tma"].items() if v.get("ms") is not None}
    ok = ok if not smoke else {k: 0.0 for k, v in row["tma"].items() if "err" in v}
    row["best"] = min(ok, key=ok.get) if ok else None
    row["best_ms"] = ok.get(row["best"]) if ok else None
    if row["best"] and not smoke and host:
        best = tuple(int(s) for s in row["best"].split(","))
        row["host_us"]["tma_best"] = _host_us(
            lambda: matmul_tma.tma_matmul_into(out, a, b, x, alpha, beta, best)
        )
    return row


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    cur = [r["eager_ms"] / r["current_ms"] for r in rows]
    tma = [r["eager_ms"] / r["best_ms"] for r in rows if r["best_ms"]]
    either = [r["eager_ms"] / min(r["current_ms"], r["best_ms"] or math.inf) for r in rows]
    return {
        "best_config": {r["product"]: r["best"] for r in rows},
        "geomean_current": geomean_of_timed(cur), "geomean_tma_best": geomean_of_timed(tma),
        "geomean_better_of_two": geomean_of_timed(either), "products": len(rows),
        "tma_products": len(tma),
    }  # fmt: skip


def _f(x: Any, spec: str = ".4f") -> str:
    return "-" if x is None or x != x else format(x, spec)


def _line(r: dict[str, Any]) -> str:
    errs = max((v.get("err", 0) for v in r["tma"].values()), default=0)
    return (f"{r['product']}: eager {_f(r['eager_ms'])} current {_f(r['current_ms'])} "
            f"(err {r['current_err']:.1e}) tma best {_f(r['best_ms'])} {r['best']} "
            f"(max err {errs:.1e})")  # fmt: skip


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| product | eager ms | current ms | x eager | best TMA ms | x eager | config "
             "| host us eager/current/tma |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        h = r.get("host_us", {})
        hs = "/".join(_f(h.get(k), ".1f") for k in ("eager", "current", "tma_best"))
        cx = r["eager_ms"] / r["current_ms"] if r["current_ms"] else None
        tx = r["eager_ms"] / r["best_ms"] if r["best_ms"] else None
        lines.append(
            f"| {r['product']} | {_f(r['eager_ms'])} | {_f(r['current_ms'])} | {_f(cx, '.3f')} "
            f"| {_f(r['best_ms'])} | {_f(tx, '.3f')} | {r['best']} | {hs} |"
        )
    lines.append("")
    lines.append("All TMA configurations (ms, or why not):")
    for r in rows:
        cells = [f"{k}: {_f(v['ms']) if 'ms' in v else v.get('error', 'declined')}"
                 for k, v in r["tma"].items()]  # fmt: skip
        lines.append(f"- {r['product']}: " + "; ".join(cells))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
