"""Where the host time of one small Triton op goes: each step of
``opbench.kernels._lib.pointwise.add`` timed alone (µs per call, best of 5 x 5,000
calls, CUDA synchronised at the end of each batch), then a cProfile of the whole call.

With ``--sweep``: device-time bandwidth of the flat kernel's add on 256 MiB f16 and f32
inputs for each block size and warp count, to pick ``pointwise.BLOCK``. With
``--sweep-sum``: the same for a full ``sum`` of 256 MiB, per programs in flight
(``reduction.TARGET_PROGRAMS``) and row-tile width (the widest ``ROW_TILES`` entry).

Usage (GPU machine): python3 benchmarks/launch_profile.py [--sweep | --sweep-sum]
"""

from __future__ import annotations

import cProfile
import io
import math
import pstats
import statistics
import sys
import time
from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib import arithmetic as ar
from opbench.kernels._lib import pointwise as pw


def per_call_us(fn: Any, calls: int = 5000) -> float:
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return round(best, 2)


def main() -> None:
    a = torch.randn(1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, device="cuda", dtype=torch.float16)
    out = torch.empty_like(a)
    consts = dict(FN=ar._add, A=1, B=1, C=0, COMPUTE=tl.float32, BLOCK=pw.BLOCK, IDX=tl.int32)
    args = (a, b, a, out, 1024, 0.0, 0.0, 0.0, 1.0, 0.0)
    compiled = pw._flat_kernel[(1,)](*args, **consts)
    full = (*args, ar._add, 1, 1, 0, tl.float32, pw.BLOCK, tl.int32)
    stream = torch._C._cuda_getCurrentRawStream(0)
    steps = {
        "eager torch.add": lambda: torch.add(a, b),
        "torch.empty(1024, f16, cuda)": lambda: torch.empty(
            1024, dtype=torch.float16, device="cuda"
        ),
        "torch.result_type(a, b)": lambda: torch.result_type(a, b),
        "torch.broadcast_shapes": lambda: torch.broadcast_shapes((1024,), (1024,)),
        "a.device.index": lambda: a.device.index,
        "a.data_ptr()": lambda: a.data_ptr(),
        "a.is_contiguous()": lambda: a.is_contiguous(),
        "_cuda_getCurrentRawStream": lambda: torch._C._cuda_getCurrentRawStream(0),
        "triton.knobs.runtime.launch_enter_hook": lambda: triton.knobs.runtime.launch_enter_hook,
        "CompiledKernel.run (everything precomputed)": lambda: compiled.run(
            1, 1, 1, stream, compiled.function, compiled.packed_metadata, None, None, None, *full
        ),
        "Launcher (pw._flat) into out": lambda: pw._flat((1,), args, **consts),
        "pw.run(add) into out": lambda: pw.run(ar._add, [a, b], out, pw.tl.float32, 1.0),
        "pw.add (allocates)": lambda: ar.add(a, b),
        "kernel[grid] into out": lambda: pw._flat_kernel[(1,)](*args, **consts),
    }
    for name, fn in steps.items():
        print(f"{per_call_us(fn):8.2f} us  {name}")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(5000):
        ar.add(a, b)
    prof.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
    print(s.getvalue())


def device_ms(call: Any, reps: int = 20) -> float:
    """Median device time (ms, CUDA events) of ``call`` over ``reps`` after 3 warm-ups."""
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        call()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def sweep() -> None:
    """Binary add (3 streams) and unary copy (2 streams) on 256 MiB, per block size, warp
    count and offset width, as a fraction of the copy bandwidth measure_peaks reports."""
    from opbench.judge.roofline import measure_peaks

    bw = measure_peaks("cuda").bandwidth_Bps
    for dtype in (torch.float16, torch.float32):
        n = (256 << 20) // torch.tensor([], dtype=dtype).element_size()
        x, y = (
            torch.randn(n, device="cuda", dtype=dtype),
            torch.randn(n, device="cuda", dtype=dtype),
        )
        out = torch.empty_like(x)
        for name, streams, fn, eager in (
            ("add", 3, ar._add, lambda x=x, y=y, out=out: torch.add(x, y, out=out)),
            ("copy", 2, pw._identity, lambda x=x, out=out: out.copy_(x)),
        ):
            ms = device_ms(eager)
            print(
                f"sweep {dtype} {name} eager: {ms:.4f} ms, {streams * n * x.element_size() / (ms / 1e3) / bw:.3f}"
            )
            for width, idx in (("i64", tl.int64), ("i32", tl.int32)):
                for block in (1024, 2048, 4096, 8192, 16384):
                    for warps in (4, 8, 16):
                        args = (x, y, x, out, n, 0.0, 0.0, 0.0, 1.0, 0.0)
                        consts = dict(
                            FN=fn, A=1, B=1 if streams == 3 else 0, C=0,
                            COMPUTE=tl.float32, BLOCK=block, IDX=idx,
                        )  # fmt: skip

                        def call(block=block, warps=warps, args=args, consts=consts) -> None:  # noqa: E501
                            pw._flat((pw.cdiv(args[4], block),), args, num_warps=warps, **consts)

                        ms = device_ms(call)
                        frac = streams * n * x.element_size() / (ms / 1e3) / bw
                        print(
                            f"sweep {dtype} {name} {width} BLOCK={block} warps={warps}: "
                            f"{ms:.4f} ms, {frac:.3f} of copy bw"
                        )


def sweep_sum() -> None:
    """Full sum of 256 MiB (one stream), per programs in flight and row-tile width."""
    from opbench.judge.roofline import measure_peaks
    from opbench.kernels._lib import reduction as red

    bw = measure_peaks("cuda").bandwidth_Bps
    tiles, target = red.ROW_TILES, red.TARGET_PROGRAMS
    for dtype in (torch.float16, torch.float32):
        x = torch.randn(
            (256 << 20) // (2 if dtype == torch.float16 else 4), device="cuda", dtype=dtype
        )
        nbytes = x.numel() * x.element_size()
        ms = device_ms(lambda x=x: torch.sum(x))
        print(f"sweep-sum {dtype} eager: {ms:.4f} ms, {nbytes / (ms / 1e3) / bw:.3f} of copy bw")
        for programs in (1056, 2112, 4224, 8448, 16896):
            for bn in (2048, 4096, 8192, 16384):
                red.TARGET_PROGRAMS = programs
                red.ROW_TILES = (*tiles[:-1], (None, 1, bn))
                red._PLANS.clear()
                ref = torch.sum(x.double())
                got = red.sum_default(x)
                assert torch.allclose(got.double(), ref, rtol=1e-2, atol=1e-1), (got, ref)
                ms = device_ms(lambda x=x: red.sum_default(x))
                print(
                    f"sweep-sum {dtype} TARGET_PROGRAMS={programs} BN={bn}: {ms:.4f} ms, "
                    f"{nbytes / (ms / 1e3) / bw:.3f} of copy bw"
                )
    red.ROW_TILES, red.TARGET_PROGRAMS = tiles, target
    red._PLANS.clear()


if __name__ == "__main__":
    if "--sweep-sum" in sys.argv:
        sweep_sum()
    elif "--sweep" in sys.argv:
        sweep()
    else:
        main()
