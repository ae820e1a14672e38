"""Does a different TMA matmul *kernel* close the gap on one-wave products (0.5-8 GFLOP)?

The committed sweeps (``matmul-paths-h200-2026-11-29*.jsonl.gz``) time the backend's
TMA kernel (:mod:`opbench.kernels._lib.matmul_tma`: persistent, tile and K loops
flattened) on every tile of the shape rule; its best on ``1024x1024x1024`` and
``512x1024x1024`` reads 0.82-0.91x eager, and no choice among its configurations does
better ("what is left is a kernel, not a choice", docs/results.md). This probe times
kernels the rule has never had, beside the served path and the backend's kernel on the
same tile, on the products of both halves of the traces:

* ``np``: one output tile per program (a grid of tiles, no persistent loop), the K loop
  pipelined by ``tl.range(num_stages=...)``: a one-wave product pays no flattened loop;
* ``ws``: the same with ``warp_specialize=True`` on the K loop (a producer warp issuing
  the TMA loads beside the ``wgmma`` warpgroup), where this Triton compiles it on sm_90;
* ``BLOCK_K`` 128: half the loop's iterations, boxes twice the size.

Each result is checked against eager's (``matmul_timing.agrees``) before its time
counts; device time by the judge's protocol (``matmul_timing.device_bench``). A variant
is worth moving into the backend only if it wins on the tuning half: the held-out half
is printed beside it, never used to pick.

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/probes/tma_variants.py --traces .gpu_data/traces --out $OUT/v.jsonl
On the CPU, ``--self-check`` runs every variant under the interpreter on small products
and compares it with PyTorch (``tests/test_tma_variants_probe.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "tune"))

__all__ = ["VARIANTS", "launch_variant", "main"]

from opbench.kernels._lib.launch import INTERPRETING  # noqa: E402
from opbench.report.means import geomean  # noqa: E402

#: name -> (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, warp_specialize)
VARIANTS: dict[str, tuple[int, int, int, int, int, bool]] = {
    "np64x128k64s4": (64, 128, 64, 4, 4, False),
    "np64x128k128s4": (64, 128, 128, 4, 4, False),
    "np128x64k64s5": (128, 64, 64, 4, 5, False),
    "np128x128k64s4": (128, 128, 64, 4, 4, False),
    "np64x64k128s4": (64, 64, 128, 4, 4, False),
    "ws64x128k64s4": (64, 128, 64, 4, 4, True),
    "ws128x128k64s4w8": (128, 128, 64, 8, 4, True),
}
#: the backend's own kernel on the same tiles (persistent, flattened loops)
BACKEND = {"p64x128k64s5": (64, 128, 64, 8, 4, 5), "p128x64k64s5": (128, 64, 64, 8, 4, 5)}


@triton.jit
def _tile_kernel(
    a_desc, b_desc, c_desc, x_ptr, M, N, K, s_xn, beta,
    A_T: tl.constexpr, B_T: tl.constexpr, HAS_BIAS: tl.constexpr, TO_F32: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, STAGES: tl.constexpr, WS: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_m
    pid_n = (pid % per_group) // group_m
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k in tl.range(0, K, BLOCK_K, num_stages=STAGES, warp_specialize=WS):
        if A_T:
            a = a_desc.load([k, off_m]).T
        else:
            a = a_desc.load([off_m, k])
        if B_T:
            b = b_desc.load([off_n, k]).T
        else:
            b = b_desc.load([k, off_n])
        if TO_F32:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
    if HAS_BIAS:
        rn = off_n + tl.arange(0, BLOCK_N)
        x = tl.load(x_ptr + rn * s_xn, mask=rn < N, other=0.0).to(tl.float32)
        acc = acc + beta * x[None, :]
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


def launch_variant(name: str, out: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                   bias: torch.Tensor | None, beta: float) -> bool:  # fmt: skip
    """``out = a @ b (+ beta * bias)`` for 2-D operands on the probe kernel ``name``;
    False where it does not apply (a layout TMA cannot describe, a bias that is not a
    row vector, a non-contiguous output). The operands are described as the backend's
    TMA kernel describes them (``matmul_tma.tma_layout``, ``_desc_spec``)."""
    from opbench.kernels._lib.matmul_tma import _desc_spec, tma_layout

    bm, bn, bk, warps, stages, ws = VARIANTS[name]
    if INTERPRETING:
        stages, ws = 1, False
    la, lb = tma_layout(a), tma_layout(b.t())  # B as [N, K]: 0 is "stored [N, K]"
    if la is None or lb is None or not out.is_contiguous():
        return False
    if bias is not None and bias.stride(0) != 0:
        return False
    M, K = a.shape
    N = b.shape[1]
    a_desc = TensorDescriptor(a, *_desc_spec(a, la, bm, bk))
    b_spec = _desc_spec(b.t(), 0, bn, bk) if lb == 0 else _desc_spec(b, 0, bk, bn)
    b_desc = TensorDescriptor(b, *b_spec)
    c_desc = TensorDescriptor(out, *_desc_spec(out, 0, bm, bn))
    x = bias[0] if bias is not None else out[0]
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _tile_kernel[grid](
        a_desc, b_desc, c_desc, x, M, N, K, x.stride(0) if bias is not None else 0,
        float(beta), A_T=la == 1, B_T=lb == 0, HAS_BIAS=bias is not None,
        TO_F32=INTERPRETING, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, STAGES=stages,
        WS=ws, num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return True


def _kernels() -> list[tuple[str, Any]]:
    return [("served", None), *[(k, None) for k in VARIANTS], *BACKEND.items()]


def _run(kind: str, cfg: Any, ops: tuple) -> bool:
    from opbench.kernels._lib import matmul, matmul_tma

    out, a, b, bias, alpha, beta = ops
    if kind == "served":
        matmul.matmul_ruled_into(*ops)
        return True
    if cfg is not None:
        return matmul_tma.tma_matmul_into(*ops, cfg)
    if alpha != 1 or a.shape[0] != 1:
        return False
    bias2 = None if bias is None else bias[0]
    return launch_variant(kind, out[0], a[0], b[0], bias2, beta)


def _warm_one(row: dict[str, Any]) -> str:
    """Compile (into Triton's disk cache) every kernel of one product: run each once."""
    from matmul_paths import _setup

    errors = []
    _, _, ops = _setup(row, "cuda")
    for kind, cfg in _kernels():
        try:
            _run(kind, cfg, ops)
        except Exception as e:  # timed (and reported) again in the parent
            errors.append(f"{kind}: {type(e).__name__}: {str(e)[:100]}")
    return "; ".join(errors)


def warm(rows: list[dict[str, Any]], jobs: int) -> None:
    """Compile in ``jobs`` processes first, one product of each specialisation (op,
    layouts, sizes' divisibility by 16): a compile is 1-3 s, and a fresh machine has
    about a hundred to do."""
    import multiprocessing

    from matmul_paths import kernel_key

    seen, firsts = set(), []
    for r in rows:
        op, specs = kernel_key(r)[0], kernel_key(r)[-1]
        key = (op, tuple(stride is None for _, stride in specs), *(r[d] % 16 == 0 for d in "MNK"))
        if key not in seen:
            seen.add(key)
            firsts.append(r)
    t0 = time.time()
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        for err in pool.imap_unordered(_warm_one, firsts):
            if err:
                print(f"  warm-up: {err[:600]}", flush=True)
    print(f"warmed {len(firsts)} specialisations in {time.time() - t0:.0f}s", flush=True)


def time_row(row: dict[str, Any], bench: Any) -> dict[str, Any]:
    """ms of eager and of every kernel on one product (``inf``: declined, failed or wrong)."""
    from matmul_paths import _setup
    from matmul_rows import reference
    from matmul_timing import agrees

    call, kw, ops = _setup(row, "cuda")
    out = ops[0]
    want = reference(row["op"], call, kw).reshape(out.shape).float()
    times: dict[str, float] = {"eager": bench(lambda: reference(row["op"], call, kw))}
    errors: dict[str, str] = {}
    for kind, cfg in _kernels():
        try:
            out.fill_(math.nan)
            if not _run(kind, cfg, ops):
                times[kind], errors[kind] = math.inf, "declined"
            elif not agrees(out, want):
                times[kind], errors[kind] = math.inf, "wrong result"
            else:
                times[kind] = bench(lambda k=kind, c=cfg: _run(k, c, ops))
        except Exception as e:  # compile failure (shared memory, warp_specialize on sm_90)
            times[kind], errors[kind] = math.inf, f"{type(e).__name__}: {str(e)[:160]}"
    return {"times": times, "errors": errors}


def self_check() -> int:
    """Every variant under the interpreter on small products of each layout, against
    PyTorch in float64 (the CPU machine's check that the probe computes the product)."""
    gen = torch.Generator().manual_seed(0)
    bad = 0
    for M, N, K in ((72, 136, 96), (64, 128, 256)):
        for la in (0, 1):
            for lb in (0, 1):
                a = torch.randn(M, K, generator=gen).half()
                b = torch.randn(K, N, generator=gen).half()
                a = a.t().contiguous().t() if la else a
                b = b.t().contiguous().t() if lb else b
                bias = torch.randn(N, generator=gen).half().expand(M, N)
                want = a.double() @ b.double() + 0.5 * bias.double()
                for name in VARIANTS:
                    out = torch.empty(M, N, dtype=torch.float16)
                    assert launch_variant(name, out, a, b, bias, 0.5)
                    err = (out.double() - want).abs().max().item()
                    ok = err <= 0.05 * max(1.0, want.abs().max().item())
                    bad += not ok
                    print(
                        f"{name} {M}x{N}x{K} a{la} b{lb} max err {err:.3g} {'ok' if ok else 'WRONG'}"
                    )
    return 1 if bad else 0


def report(path: str, command: str) -> str:
    """Markdown of a sweep (JSON lines, gzipped or not): per half, the geomean of eager
    over each kernel on the products every kernel ran, the best of all of them, and how
    often each was the fastest."""
    import collections
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = [json.loads(x) for x in f]
    names = [k for k in rows[0]["times"] if k != "eager"]
    r0 = rows[0]
    out = [f"# TMA matmul kernels on one-wave products, {r0['gpu']}", "",
           f"`{command}` (torch {r0['torch']}, Triton {r0['triton']}); device time by the "
           "judge's protocol, every result checked against eager first. Speedups are eager "
           "over the kernel (> 1: faster), geomeans over the products every kernel ran.", ""]  # fmt: skip
    for half in ("tuning", "heldout"):
        ok = [r for r in rows if r["half"] == half
              and all(r["times"].get(n, math.inf) < math.inf for n in names)]  # fmt: skip
        if not ok:
            continue
        wins = collections.Counter(
            min((v, k) for k, v in r["times"].items() if k != "eager")[1] for r in ok
        )
        out += [f"## {half} half: {len(ok)} products", "", "| kernel | geomean | fastest on |",
                "| --- | --- | --- |"]  # fmt: skip
        for n in names:
            g = geomean([r["times"]["eager"] / r["times"][n] for r in ok])
            out.append(f"| {n} | {g:.3f} | {wins.get(n, 0)} |")
        best = geomean([r["times"]["eager"] / min(v for k, v in r["times"].items() if k != "eager")
                    for r in ok])  # fmt: skip
        out += [f"| best of all | {best:.3f} | |", ""]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="../shared/traces")
    ap.add_argument("--out", help="JSON lines, appended")
    ap.add_argument("--min-gflop", type=float, default=0.5)
    ap.add_argument("--max-gflop", type=float, default=8.0)
    ap.add_argument("--limit", type=int, default=100000, help="traced calls per op, as judged")
    ap.add_argument("--budget", type=float, default=300, help="start no product after this (s)")
    ap.add_argument("--jobs", type=int, default=14, help="compiling processes")
    ap.add_argument("--self-check", action="store_true", help="interpreter check, no timing")
    ap.add_argument("--report", help="a sweep's JSON lines: print its markdown summary")
    ap.add_argument("--command", default="", help="the sweep's command, for --report")
    opt = ap.parse_args()
    if opt.report:
        print(report(opt.report, opt.command))
        return 0
    if opt.self_check:
        return self_check()
    from matmul_paths import products
    from matmul_timing import device_bench

    started = time.time()
    rows = [r for r in products(opt.traces, opt.min_gflop, opt.limit)
            if r["batch"] == 1 and r["itemsize"] == 2 and r["gflop"] <= opt.max_gflop]  # fmt: skip
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": triton.__version__}  # fmt: skip
    print(f"{len(rows)} products", flush=True)
    warm(rows, opt.jobs)
    with open(opt.out, "a") as f:
        for i, r in enumerate(rows):
            if time.time() - started > opt.budget:
                print(f"budget spent: {len(rows) - i} products left", flush=True)
                break
            res = time_row(r, device_bench)
            f.write(json.dumps({**r, **res, **meta}) + "\n")
            f.flush()
            t = res["times"]
            e = t["eager"]
            line = " ".join(
                f"{k}={e / v:.2f}" for k, v in t.items() if k != "eager" and v < math.inf
            )
            print(
                f"{i} {r['half'][:4]} {r['op'][:5]} {r['M']}x{r['N']}x{r['K']} eager {e * 1e3:.1f}us {line}",
                flush=True,
            )
            if i == 0 and res["errors"]:
                print("  errors:", json.dumps(res["errors"])[:1500], flush=True)
    print(f"done in {time.time() - started:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
