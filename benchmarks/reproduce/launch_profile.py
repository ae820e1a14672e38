"""Where the host time of one small Triton op goes: each step of
``opbench.kernels._lib.pointwise.add`` timed alone (µs per call, best of 5 x 5,000
calls, CUDA synchronised at the end of each batch), then a cProfile of the whole call.

With ``--sweep``: device-time bandwidth of the flat kernel's add on 256 MiB f16 and f32
inputs for each block size and warp count, to pick ``pointwise.BLOCK``. With
``--sweep-sum``: the same for a full ``sum`` of 256 MiB f16 and f32, per variant of the
reduction's main loop and split grid (:data:`SUM_VARIANTS`: ``reduction.STAGES``,
``PINGPONG``, ``PROGRAMS_PER_SM``, ``EVICT`` and the long-row tile), plus two 32 MiB
guard cases; each variant given after the flag (``"STAGES=4,PROGRAMS_PER_SM=8"``, one
argument each) replaces the list.

Usage (GPU machine): python3 benchmarks/reproduce/launch_profile.py [--sweep | --sweep-sum [VARIANT ...]]

Committed results (tables of its printed output): ``benchmarks/results/sum-sweep-h100.md``
(``--sweep-sum``, 2026-11-23), ``sum-loop-h100-2026-11-25.md`` (``--sweep-sum`` over the
pipelined loop's variants) and ``triton-launch-bandwidth-h100.md`` (no flag and ``--sweep``,
beside ``triton_backend.py --parts bandwidth``):
    python3 benchmarks/reproduce/launch_profile.py --sweep-sum
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
from opbench.kernels._lib import pointwise_kernels as pwk


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
    compiled = pwk._flat_kernel[(1,)](*args, **consts)
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
        "kernel[grid] into out": lambda: pwk._flat_kernel[(1,)](*args, **consts),
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
            ("copy", 2, pw.IDENTITY, lambda x=x, out=out: out.copy_(x)),
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


#: ``--sweep-sum`` variants: (name, ``reduction`` module constants to set). The loop
#: (``STAGES``: Triton's cp.async pipeline when > 1, ``PINGPONG``: two chunks in
#: registers), programs per SM of a split launch, the long-row tile and the loads' L2
#: hint. Names say the values; the module's defaults are whatever it holds (printed).
SUM_VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("plain loop, 16/SM (the old plan)", dict(STAGES=1, PINGPONG=False, PROGRAMS_PER_SM=16)),
    ("plain loop, 4/SM", dict(STAGES=1, PINGPONG=False, PROGRAMS_PER_SM=4)),
    ("stages 3, 2/SM", dict(STAGES=3, PINGPONG=False, PROGRAMS_PER_SM=2)),
    ("stages 3, 4/SM", dict(STAGES=3, PINGPONG=False, PROGRAMS_PER_SM=4)),
    ("stages 3, 8/SM", dict(STAGES=3, PINGPONG=False, PROGRAMS_PER_SM=8)),
    ("stages 3, 16/SM", dict(STAGES=3, PINGPONG=False, PROGRAMS_PER_SM=16)),
    ("stages 2, 4/SM", dict(STAGES=2, PINGPONG=False, PROGRAMS_PER_SM=4)),
    ("stages 4, 4/SM", dict(STAGES=4, PINGPONG=False, PROGRAMS_PER_SM=4)),
    ("stages 3, 4/SM, BN 8192 (8 warps)",
     dict(STAGES=3, PINGPONG=False, PROGRAMS_PER_SM=4, LONG_ROW_BN=8192)),
    ("pingpong, 4/SM", dict(PINGPONG=True, PROGRAMS_PER_SM=4)),
    ("pingpong, 8/SM", dict(PINGPONG=True, PROGRAMS_PER_SM=8)),
    ("pingpong, 4/SM, evict_first", dict(PINGPONG=True, PROGRAMS_PER_SM=4, EVICT="evict_first")),
]  # fmt: skip
#: Variants also timed on the 32 MiB guard cases (a 16M-element f16 sum, and the column
#: sums of a [4096, 4096] f16 matrix), whose plans the programs-per-SM count changes too.
SUM_GUARDS = (0, 3, 4, 5, 9)


def _set_reduction(red: Any, consts: dict[str, Any]) -> dict[str, Any]:
    """Set ``reduction`` module constants (``LONG_ROW_BN`` replaces the widest row tile);
    returns what to pass back to restore them."""
    old: dict[str, Any] = {}
    for name, value in consts.items():
        if name == "LONG_ROW_BN":
            old["ROW_TILES"] = red.ROW_TILES
            red.ROW_TILES = (*red.ROW_TILES[:-1], (None, 1, value))
        else:
            old[name] = getattr(red, name)
            setattr(red, name, value)
    red._PLANS.clear()
    from opbench.kernels._lib import reduction_ops

    reduction_ops._CALLS.clear()  # repeat calls' launches were planned under the old tiles
    return old


def _parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """``"STAGES=4,PROGRAMS_PER_SM=8"`` -> (the text, its constants)."""
    import ast

    consts: dict[str, Any] = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        try:
            consts[name.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            consts[name.strip()] = value.strip()
    return text, consts


def _occupancy(red: Any, consts: dict[str, Any]) -> str:
    """Registers, shared memory and resident programs per SM (H100: 64K registers, 228 KB
    shared, 64 warps) of the reduction kernel compiled for the plan constexprs ``consts``."""
    names = [p.name for p in red._reduce_kernel.params if p.is_constexpr]
    want = tuple(consts[n] for n in names)
    for compiled, values, *_ in red._reduce._compiled.values():
        warps = compiled.metadata.num_warps
        if values == want and warps == consts["num_warps"]:
            regs = getattr(compiled, "n_regs", 0)
            shared = compiled.metadata.shared
            by_regs = 65536 // max(1, -(-regs // 8) * 8 * 32 * warps)
            by_smem = (228 * 1024) // (shared + 1024)
            return f"{regs} regs, {shared // 1024} KB smem, {min(by_regs, by_smem, 64 // warps)}/SM"
    return "?"


def sweep_sum(variants: list[tuple[str, dict[str, Any]]] | None = None) -> None:
    """Full sum of 256 MiB (one stream) per reduction variant (:data:`SUM_VARIANTS`), each
    result checked against a float64 sum and for the same bits on a repeat call, eager
    beside; then the guard cases for :data:`SUM_GUARDS`. Device time, CUDA events, as a
    fraction of the copy bandwidth measure_peaks reports. About a minute on the H100
    (most of it compiles)."""
    from opbench.judge.roofline import measure_peaks
    from opbench.kernels._lib import reduction as red
    from opbench.kernels._lib import reduction_ops

    t0 = time.perf_counter()
    guards = [v for i, v in enumerate(SUM_VARIANTS) if i in SUM_GUARDS]
    if variants is not None:
        guards = variants
    variants = variants if variants is not None else SUM_VARIANTS
    bw = measure_peaks("cuda").bandwidth_Bps
    defaults = {n: getattr(red, n) for n in ("STAGES", "PINGPONG", "PROGRAMS_PER_SM", "EVICT")}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"sweep-sum: copy bw {bw / 1e12:.3f} TB/s, {sms} SMs, reduction defaults "
          f"{defaults}, long-row tile {red.ROW_TILES[-1][1:]}")  # fmt: skip
    g = torch.Generator(device="cuda").manual_seed(0)
    cases: list[tuple[str, torch.Tensor, Any, list[tuple[str, dict[str, Any]]]]] = []
    for dtype in (torch.float16, torch.float32):
        n = (256 << 20) // torch.tensor([], dtype=dtype).element_size()
        x = torch.randn(n, device="cuda", dtype=dtype, generator=g)
        cases.append((f"sum 256 MiB {str(dtype)[6:]}", x, None, variants))
    x = torch.randn(16 << 20, device="cuda", dtype=torch.float16, generator=g)
    cases.append(("sum 32 MiB float16", x, None, guards))
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.float16, generator=g)
    cases.append(("sum(0) [4096, 4096] float16", x, [0], guards))
    for label, x, dims, chosen in cases:
        nbytes = x.numel() * x.element_size()
        ref = x.double().sum() if dims is None else x.double().sum(dims)
        # two units in the last place of the result's dtype, plus the float32 accumulation's
        # error: a chunk of 4,096 values left out or read twice moves a sum by ~64
        ulp = torch.finfo(x.dtype).eps * torch.exp2(torch.floor(torch.log2(ref.abs() + 1e-30)))
        tol = 2 * ulp + 0.05
        ms = device_ms(lambda x=x, dims=dims: x.sum() if dims is None else x.sum(dims))
        print(f"sweep-sum {label} eager: {ms:.4f} ms, {nbytes / (ms / 1e3) / bw:.3f} of copy bw")
        bits: dict[tuple, torch.Tensor] = {}  # (grid, BLOCK_N) -> the first variant's result
        for name, consts in chosen:
            old = _set_reduction(red, consts)
            try:
                got = reduction_ops.sum_dim(x, dims)
                err = ((got.double() - ref).abs() / tol).max().item()
                assert err <= 1, f"{name}: {got} against float64 {ref}"
                assert torch.equal(got, reduction_ops.sum_dim(x, dims)), (
                    f"{name}: not deterministic"
                )
                plan = red._reduce_plan(
                    x, red.normalize_dims(x, dims), x.dtype, red.SUM, False, None
                )[1]
                # every loop sums a program's chunks in order: one split, one set of bits
                same = bits.setdefault((plan[0], plan[2]["BLOCK_N"]), got)
                assert torch.equal(got, same), f"{name}: other bits than the same split's"
                ms = device_ms(lambda x=x, dims=dims: reduction_ops.sum_dim(x, dims))
                print(
                    f"sweep-sum {label} {name}: {ms:.4f} ms, {nbytes / (ms / 1e3) / bw:.3f} of "
                    f"copy bw (grid {plan[0]}, STAGES {plan[2]['STAGES']}, PINGPONG "
                    f"{plan[2]['PINGPONG']}, {_occupancy(red, plan[2])}, err/tol {err:.2f})"
                )
            finally:
                _set_reduction(red, old)
    # amax (NaN last) and mean through the two pipelined loops, against eager
    x = cases[0][1]
    loops = (("stages 3", dict(STAGES=3, PINGPONG=False)), ("pingpong", dict(PINGPONG=True)))
    for name, consts in loops:
        old = _set_reduction(red, consts)
        try:
            assert torch.equal(reduction_ops.amax(x), torch.amax(x)), name
            assert torch.allclose(
                reduction_ops.mean_dim(x, None).float(), x.float().mean(), atol=1e-3
            ), name
            y = x[: 3 << 20].clone()
            y[-1] = float("nan")
            assert reduction_ops.amax(y).isnan(), name
        finally:
            _set_reduction(red, old)
    print(f"sweep-sum: amax and mean checked; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)
        sys.exit(0)
    if not torch.cuda.is_available():
        sys.exit("launch_profile.py times CUDA kernels: run it on a GPU machine")
    if "--sweep-sum" in sys.argv:
        given = [_parse_variant(a) for a in sys.argv[sys.argv.index("--sweep-sum") + 1 :]]
        sweep_sum(given or None)
    elif "--sweep" in sys.argv:
        sweep()
    else:
        main()
