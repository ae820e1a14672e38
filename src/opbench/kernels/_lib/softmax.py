"""Softmax and log-softmax, forward and backward, over any dim of strided inputs: one
forward and one backward kernel (plus one each for long contiguous rows), rows = every
index but ``dim``, columns = ``dim``.

How a call is launched (:func:`_plan`):

* The dims other than ``dim`` are merged where contiguous in *every* tensor of the call
  (input, output, grad) and addressed by at most two dims (:func:`reduction.offsets`);
  ``dim`` itself is one strided column, a constexpr unit stride when it is contiguous in
  all of them (the usual last-dim softmax), so the compiler vectorises. More than two
  kept dims left after merging (rare) copies the inputs contiguous and writes a
  contiguous temporary.
* A row that fits in one tile (``SINGLE``) is loaded once: max, exp, sum and the output
  from registers (one read, one write). Longer rows take two passes: an online pass
  keeping the running max and the sum rescaled to it, then the output pass.
* Forward and backward, ``dim`` contiguous (the usual last-dim softmax): rows of at
  most :data:`SINGLE_MAX` elements in ``[BLOCK_M, BLOCK_N]`` tiles, ``BLOCK_N`` the row
  rounded up to a power of 2, one to :data:`MAX_VECS` (backward: :data:`BWD_MAX_VECS` of
  each input) 16-byte vectors a thread and enough programs (:func:`_row_tiling`); the
  row length arrives as a known multiple of the vector, so the column mask does not
  split the vectors (before, every f16 element was loaded alone: forward ``[128, 128,
  128]`` f16 7.87 us on the H100, eager 5.15; the backward until it took these tiles
  too). The backward can also loop over its tiles on fewer programs, pipelined
  (:data:`BWD_PERSIST`).
* Contiguous rows longer than :data:`SINGLE_MAX`, forward and backward: one program a
  row, the row's body 16-byte aligned whatever its start (:mod:`softmax_long`, which
  also holds the per-tile row math both modules' kernels share).
* ``dim`` strided: column-shaped tiles (64 x 64) when a kept dim is contiguous, so it
  coalesces; else row-shaped ones (``BLOCK_N`` = the row rounded up to one of
  :data:`ROW_WIDTHS`, 4,096 elements a tile).

Computation is float32 for f16/bf16/f32 (float64 for f64), cast once on store. A row of
all ``-inf`` gives NaN, and a NaN anywhere in a row makes the row NaN, as in eager.
``half_to_float`` (f16 in, f32 out) follows the CUDA kernels (eager's CPU kernels reject
it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import triton.language as tl

from opbench.kernels._lib import softmax_long as long_rows
from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING
from opbench.kernels._lib.launch import Launcher, cdiv, next_pow2, remember
from opbench.kernels._lib.native_launch import declare_replay
from opbench.kernels._lib.pointwise import index_type
from opbench.kernels._lib.pointwise_rules import destination
from opbench.kernels._lib.reduction import vec_of
from opbench.kernels._lib.softmax_kernels import _backward, _forward

__all__ = [
    "softmax",
    "softmax_out",
    "log_softmax",
    "log_softmax_out",
    "softmax_backward_data",
    "softmax_backward_data_out",
    "log_softmax_backward_data",
    "log_softmax_backward_data_out",
]


#: Elements per tile on the GPU (32 fp32 registers per thread at 4 warps) when ``dim``
#: is strided.
TILE = 4096
#: Row tile widths when neither ``dim`` nor a kept dim is contiguous: the row rounded up
#: to one of these (rows longer than the last take the two-pass (online) path). Few
#: widths, few compiles. (Contiguous rows took these in the backward until they took
#: :func:`_row_tiling`'s: then adding 128 made 32x12x128x128 f16 slower on the H100,
#: 26.6 -> 31.1 us, eager 18.1, while every element was loaded alone.)
ROW_WIDTHS = (16, 64, 256, 1024, 4096)
#: Column tiles when ``dim`` is strided: short rows in one tile, else 64 x 64 tiles.
COL_WIDTHS = (16, 64)
#: Contiguous rows of at most this many elements: one ``[BLOCK_M, BLOCK_N]``
#: tile per program, ``BLOCK_N`` the row rounded up to a power of 2, loaded once
#: (:func:`_row_tiling`); longer rows take :mod:`softmax_long`'s kernels.
SINGLE_MAX = 4096
#: Threads the H100 keeps resident for these kernels (132 SMs x 1,024: half the
#: hardware's 2,048, for their registers). A problem that fits them at one 16-byte
#: vector a thread gets one vector a thread (latency-bound: the most loads in flight),
#: larger ones up to four.
RESIDENT_THREADS = 132 * 1024
#: Fewer row programs than this halve the rows a program takes (down to one).
MIN_PROGRAMS = 512
#: The most 16-byte vectors a thread of the forward's row tiles loads (elements a thread
#: grow to this while the problem exceeds RESIDENT_THREADS; :func:`_row_tiling`).
MAX_VECS = 4
#: The backward's (contiguous rows of at most SINGLE_MAX, :func:`_row_tiling` too): the
#: most vectors a thread loads of each input. Two inputs: 2 keeps the forward's four
#: vectors a thread in flight. The backward took ROW_WIDTHS tiles before, the row length
#: a runtime integer, so every element was loaded alone: the traced [1, 24, 512, 512]
#: f16 plan read 64 ``ld.global.b16`` a thread, 125 registers (four 4-warp programs an
#: SM), half of each [4, 1024] tile masked (25.0 us on the H100: 1.5 TB/s; eager 32.3,
#: FlagGems 18.9); rows of 128 took 256-wide tiles (the f32 [1, 16, 128, 128] case 128
#: programs on 132 SMs). Now (sm_90 PTX, Triton 3.9): [4, 512] tiles, 3,072 programs,
#: 2 + 2 ``ld.global.v4`` and 2 ``st.global.v4`` a thread, 40 registers; 1: 26
#: registers, 6,144 programs; 4: 64 registers, 1,536 programs.
BWD_MAX_VECS = 2
#: The backward's row tiles (as BWD_MAX_VECS) on at most this many programs an SM, each
#: looping over its share of the tiles with the next ones' loads in flight
#: (``tl.range(num_stages=BWD_STAGES)``: cp.async copies into shared memory); 0: one tile
#: a program, all launched at once (the default until timed). A one-tile program loads,
#: waits, sums and stores once, so an SM keeps loads in flight only through its other
#: resident programs, and the last partial wave of a multi-wave grid leaves SMs idle
#: (the traced [1, 24, 512, 512] f16: 3,072 programs of 40 registers, 12 resident an SM,
#: 1.9 waves). sm_90 (Triton 3.9) of that case at 4 programs an SM: 528 programs, 16-byte
#: ``cp.async.cg`` copies, 54 registers, 8 KB shared at 2 stages (16 KB at 3).
BWD_PERSIST = 0
BWD_STAGES = 2
#: Under the interpreter: big tiles, few programs; rows longer than this are two-pass.
_INTERP_TILE = 16384
INTERP_MAX_WIDTH = 4096


# ----------------------------------------------------------------------------- launching


def _merge_kept(
    sizes: Sequence[int], strides: list[list[int]]
) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours contiguous in every tensor."""
    out_sizes: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for i, s in enumerate(sizes):
        if s == 1:
            continue
        if out_sizes and all(o[-1] == st[i] * s for o, st in zip(out_strides, strides)):
            out_sizes[-1] *= s
            for o, st in zip(out_strides, strides):
                o[-1] = st[i]
        else:
            out_sizes.append(s)
            for o, st in zip(out_strides, strides):
                o.append(st[i])
    return out_sizes, out_strides


def _pow_at_least(n: int, widths: Sequence[int]) -> int:
    return next((w for w in widths if w >= n), widths[-1])


def _row_tiling(M: int, N: int, elem: int, bwd: bool = False) -> tuple[int, int, int]:
    """``(BLOCK_M, BLOCK_N, num_warps)`` of the forward (``bwd``: backward) kernel for
    ``M`` contiguous rows of ``N <= SINGLE_MAX`` elements, the narrowest dtype ``elem``
    bytes: the whole row in ``BLOCK_N`` (a power of 2, so a row of 128 f16 is 16 lanes of
    one 16-byte vector and its reductions stay within a warp), ``ept`` elements a thread
    (one 16-byte vector while the problem fits :data:`RESIDENT_THREADS` at that, up to
    :data:`MAX_VECS`, or :data:`BWD_MAX_VECS` of each input), rows per program halved
    until there are :data:`MIN_PROGRAMS` programs, and the warps that tile then needs
    (1-8). Eager's warp softmax gives each row of <= 1,024 elements one warp (two rows of
    <= 128), loading one element at a time."""
    vec = max(1, 16 // elem)
    bn = next_pow2(N)
    ept = vec
    most = max(1, BWD_MAX_VECS if bwd else MAX_VECS) * vec
    while ept < most and M * bn > ept * RESIDENT_THREADS:
        ept *= 2
    bm = max(1, min(next_pow2(M), 128 * ept // bn))
    while bm > 1 and cdiv(M, bm) < MIN_PROGRAMS:
        bm //= 2
    warps = min(8, max(1, bm * bn // (32 * ept)))
    return bm, bn, warps


def _plan(
    tensors: list[torch.Tensor], dim: int, bwd: bool
) -> tuple[int, int, int, list[int], list[int], int, bool, bool, int, int, int, bool] | None:
    """``(M, N, MODE_M, per-tensor (s0, s1) flattened, per-tensor column strides, md1,
    UNIT_N, SINGLE, BLOCK_M, BLOCK_N, num_warps, LONG)``, or None when the kept dims
    merge to more than two. ``LONG``: the forward's long-row kernel (contiguous rows
    longer than one tile), which reads ``BLOCK_N`` as its tile."""
    t0 = tensors[0]
    nd = t0.dim()
    kept = [d for d in range(nd) if d != dim]
    sizes, strides = _merge_kept(
        [t0.shape[d] for d in kept], [[t.stride(d) for d in kept] for t in tensors]
    )
    if len(sizes) > 2:
        return None
    M = math.prod(sizes)
    N = t0.shape[dim]
    col = [t.stride(dim) for t in tensors]
    if not sizes:
        mode, md1, pairs = 1, 1, [(0, 0) for _ in tensors]
    elif len(sizes) == 1:
        mode = 0 if all(s[0] == 1 for s in strides) else 1
        md1, pairs = 1, [(s[0], 0) for s in strides]
    elif all(s[1] == 1 for s in strides):
        mode, md1, pairs = 3, sizes[1], [(s[0], 0) for s in strides]
    else:
        mode, md1, pairs = 2, sizes[1], [(s[0], s[1]) for s in strides]
    unit_n = all(c == 1 for c in col) or N == 1
    kept_unit = mode in (0, 3)
    warps, long = 4, False
    elem = min(t.element_size() for t in tensors)
    if _INTERPRETING:
        bn = min(next_pow2(N), INTERP_MAX_WIDTH)
        bm = min(next_pow2(M), max(1, _INTERP_TILE // bn))
        long = unit_n and N > INTERP_MAX_WIDTH
        if long:
            bm, bn = 1, max(long_rows.LONG_COLS, INTERP_MAX_WIDTH)
    elif unit_n and N > SINGLE_MAX:
        long, bm, bn, warps = True, 1, long_rows.LONG_TILE_BYTES // elem, long_rows.LONG_WARPS
    elif unit_n:
        bm, bn, warps = _row_tiling(M, N, elem, bwd)
    elif not kept_unit:
        bn = _pow_at_least(N, ROW_WIDTHS)
        bm = max(1, TILE // bn)
    else:
        bn = _pow_at_least(N, COL_WIDTHS)
        bm = TILE // bn
    single = N <= bn
    flat = [v for p in pairs for v in p]
    return M, N, mode, flat, col, md1, unit_n, single, bm, bn, warps, long


def _compute(dtype: torch.dtype) -> Any:
    return tl.float64 if dtype == torch.float64 else tl.float32


def _check_float(t: torch.Tensor, what: str) -> None:
    if t.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        if t.dtype.is_floating_point or t.dtype.is_complex:
            raise NotImplementedError(f"{what} on {t.dtype}")
        raise RuntimeError(f"\"{what}\" not implemented for '{t.dtype}'")


def _wrap(dim: int, nd: int) -> int:
    bound = max(nd, 1)
    if not -bound <= dim < bound:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-bound}, {bound - 1}], "
            f"but got {dim})"
        )
    return dim % bound


def _run(inputs: list[torch.Tensor], dest: torch.Tensor, dim: int, log: bool, bwd: bool,
         key: tuple | None = None) -> torch.Tensor:  # fmt: skip
    """Launch the forward (one input) or backward (grad, output) kernel into ``dest``;
    with ``key`` (no ``out=``), remember the launch for :func:`_repeat`."""
    if dest.numel() == 0:
        if key is not None:
            remember(_LAUNCHES, key, (tuple(dest.shape), dest.stride(), dest.dtype, None))
        return dest
    if inputs[0].dim() == 0:
        key = None
        inputs = [t.view(1) for t in inputs]
        target = dest.view(1)
        dim = 0
    else:
        target = dest
    layout = (dim, log, bwd, *((t.shape, t.stride(), t.dtype) for t in (*inputs, target)))
    launch = _LAUNCHES.get(layout)
    if launch is None:
        plan = _plan([*inputs, target], dim, bwd)
        if plan is None:  # more than two kept dims after merging: copied, not cached
            inputs = [t.contiguous() for t in inputs]
            target = torch.empty(dest.shape, dtype=dest.dtype, device=dest.device)
            plan = _plan([*inputs, target], dim, bwd)
            assert plan is not None
            launch = _launch_args(plan, inputs, target, dim, log, bwd)
            key = None
        else:
            launch = _launch_args(plan, inputs, target, dim, log, bwd)
            remember(_LAUNCHES, layout, launch)
    launcher, grid, ints, consts = launch
    launcher(grid, (*inputs, target, *ints), **consts)
    if target is not dest and target.data_ptr() != dest.data_ptr():
        dest.copy_(target)
    elif key is not None:
        remember(_LAUNCHES, key, (tuple(dest.shape), dest.stride(), dest.dtype, launch))
    return dest


#: Two kinds of entries:
#:
#: * (dim, log, backward, every tensor's layout and dtype) -> :func:`_launch_args`'
#:   launch: planning cost more host time than the launch, and models repeat their
#:   layouts;
#: * (entry point, its tensors' layouts and dtypes, its other arguments as given) ->
#:   ``(output shape, strides, dtype, launch or None)``: a repeat call without ``out=``
#:   checks nothing again (the same arguments passed the checks before) and only
#:   allocates and launches (:func:`_repeat`): 5.6-10.5 -> 2.9-3.6 us of Python a call on
#:   the 16 traced softmax cases (launches stubbed, CPU; ``benchmarks/reproduce/host_profile.py
#:   --python-only``).
_LAUNCHES: dict[tuple, Any] = {}


def _repeat(call: Any, inputs: tuple, device: torch.device) -> torch.Tensor:
    """A repeat call: the output allocated as the first call's, one launch."""
    shape, stride, dtype, launch = call
    out = torch.empty_strided(shape, stride, dtype=dtype, device=device)
    if launch is not None:
        launcher, grid, ints, consts = launch
        launcher(grid, (*inputs, out, *ints), **consts)
    return out


def _launch_args(
    plan: tuple, inputs: list[torch.Tensor], target: torch.Tensor, dim: int, log: bool,
    bwd: bool,
) -> tuple[Launcher, tuple[int], tuple[int, ...], dict[str, Any]]:  # fmt: skip
    """Launcher, grid, integers and constexprs of the kernel's launch, from
    :func:`_plan`'s ``plan`` of these tensors."""
    M, N, mode, flat, col, md1, unit_n, single, bm, bn, warps, long = plan
    tensors = [*inputs, target]
    compute = _compute(inputs[0].dtype if not bwd else target.dtype)
    if any(t.dtype == torch.float64 for t in inputs):
        compute = tl.float64
    if long:
        round_product = bwd and _rounds_product(inputs[0], log)
        return long_rows.long_args(
            M, N, mode, flat, md1, tensors, log, bwd, compute, bn, warps, round_product
        )
    used = ([md1] if mode >= 2 else []) + ([] if mode == 0 else flat) + ([] if unit_n else col)
    if unit_n:
        used.append(N)
    vec = vec_of(used, tensors)
    md1, flat, col = md1 // vec, [v // vec for v in flat], [v // vec for v in col]
    vec_n = vec if unit_n else 1
    idx = index_type(M * N, list(target.shape), [t.stride() for t in tensors])
    if bwd:
        consts: dict[str, Any] = dict(
            LOG=log, COMPUTE=compute, MODE_M=mode, UNIT_N=unit_n, SINGLE=single, VEC=vec,
            VEC_N=vec_n, IDX=idx, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps,
        )  # fmt: skip
        round_product = _rounds_product(inputs[0], log)
        # on the CPU, product first where eager's CUDA persistent kernel would run (the
        # softmax dim innermost, at most 1,024 elements and 4 KiB a row): how this was
        # first matched; on CUDA every softmax backward path subtracts from the rounded
        # product (:func:`product`)
        inner = all(s == 1 for s in inputs[0].shape[dim + 1 :])
        consts["PRODUCT_FIRST"] = round_product or (
            inner and N <= 1024 and N * inputs[0].element_size() <= 4096
        )
        consts["ROUND"] = round_product
        grid, loop = cdiv(M, bm), 0
        if single and unit_n and BWD_PERSIST > 0 and grid > BWD_PERSIST * _sms(target):
            grid, loop = BWD_PERSIST * _sms(target), max(1, BWD_STAGES)
        consts["LOOP"] = loop
        return _backward, (grid,), (M, N // vec_n, md1, *flat, *col), consts
    consts = dict(
        LOG=log, COMPUTE=compute, MODE_M=mode, UNIT_N=unit_n, SINGLE=single, VEC=vec,
        VEC_N=vec_n, IDX=idx, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps,
    )  # fmt: skip
    return _forward, (cdiv(M, bm),), (M, N // vec_n, md1, *flat, *col), consts


#: SMs of each CUDA device (read once); the CPU's plans assume an H100's 132.
_SMS: dict[int, int] = {}


def _sms(t: torch.Tensor) -> int:
    if not t.is_cuda:
        return 132
    dev = t.get_device()
    if dev not in _SMS:
        _SMS[dev] = torch.cuda.get_device_properties(dev).multi_processor_count
    return _SMS[dev]


def _rounds_product(grad: torch.Tensor, log: bool) -> bool:
    """Whether softmax's backward rounds ``grad * output`` to the gradient's dtype before
    summing and subtracting it: CUDA eager's ``softmax_backward_cuda_out`` computes
    ``tmp = grad * output`` as a tensor op (f16/bf16 products rounded), then ``tmp -
    output * sum(tmp)`` in float32 on every kernel path; the CPU does not."""
    return grad.is_cuda and not log


def _forward_op(self: torch.Tensor, dim: int, half_to_float: bool, out: Any, log: bool,
                key: tuple | None = None):  # fmt: skip
    name = "log_softmax" if log else "softmax"
    _check_float(self, name)
    if half_to_float and self.dtype != torch.float16:
        raise RuntimeError("conversion is supported for Half type only")
    dtype = torch.float32 if half_to_float else self.dtype
    d = _wrap(dim, self.dim())
    dest = destination(tuple(self.shape), dtype, [self], out=out)
    return _run([self], dest, d, log, False, key)


def softmax(self: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    key = ("softmax", self.shape, self.stride(), self.dtype, dim, half_to_float)
    call = _LAUNCHES.get(key)
    if call is not None:
        return _repeat(call, (self,), self.device)
    return _forward_op(self, dim, half_to_float, None, False, key)


def softmax_out(
    self: torch.Tensor, dim: int, half_to_float: bool, *, out: torch.Tensor
) -> torch.Tensor:
    return _forward_op(self, dim, half_to_float, out, False)


def log_softmax(self: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    key = ("log_softmax", self.shape, self.stride(), self.dtype, dim, half_to_float)
    call = _LAUNCHES.get(key)
    if call is not None:
        return _repeat(call, (self,), self.device)
    return _forward_op(self, dim, half_to_float, None, True, key)


def log_softmax_out(
    self: torch.Tensor, dim: int, half_to_float: bool, *, out: torch.Tensor
) -> torch.Tensor:
    return _forward_op(self, dim, half_to_float, out, True)


def _backward_op(grad: torch.Tensor, output: torch.Tensor, dim: int, input_dtype: Any,
                 out: Any, log: bool, key: tuple | None = None) -> torch.Tensor:  # fmt: skip
    _check_float(grad, "softmax_backward_data")
    _check_float(output, "softmax_backward_data")
    if tuple(grad.shape) != tuple(output.shape):
        raise RuntimeError(
            f"grad_output and output must have the same shape, got {list(grad.shape)} "
            f"and {list(output.shape)}"
        )
    dtype = grad.dtype
    if grad.dtype != input_dtype and grad.dtype == torch.float32 and (input_dtype == torch.float16):
        dtype = torch.float16  # the CUDA kernels' half_to_float backward
    d = _wrap(dim, grad.dim())
    dest = destination(tuple(grad.shape), dtype, [grad, output], out=out)
    return _run([grad, output], dest, d, log, True, key)


def _backward_key(name: str, grad: torch.Tensor, output: torch.Tensor, dim: int,
                  input_dtype: Any) -> tuple:  # fmt: skip
    return (name, grad.shape, grad.stride(), grad.dtype, output.shape, output.stride(),
            output.dtype, dim, input_dtype)  # fmt: skip


# Alike log_softmax_backward_data's on purpose: one def per ATen schema, and a shared
# helper would put one more Python call on every repeat call (_LAUNCHES cuts that time).
def softmax_backward_data(
    grad_output: torch.Tensor, output: torch.Tensor, dim: int, input_dtype: torch.dtype
) -> torch.Tensor:
    key = _backward_key("softmax_bwd", grad_output, output, dim, input_dtype)
    call = _LAUNCHES.get(key)
    if call is not None:
        return _repeat(call, (grad_output, output), grad_output.device)
    return _backward_op(grad_output, output, dim, input_dtype, None, False, key)


def softmax_backward_data_out(
    grad_output: torch.Tensor,
    output: torch.Tensor,
    dim: int,
    input_dtype: torch.dtype,
    *,
    grad_input: torch.Tensor,
) -> torch.Tensor:
    return _backward_op(grad_output, output, dim, input_dtype, grad_input, False)


# Alike softmax_backward_data's on purpose (one def per schema, no extra call on a repeat).
def log_softmax_backward_data(
    grad_output: torch.Tensor, output: torch.Tensor, dim: int, input_dtype: torch.dtype
) -> torch.Tensor:
    key = _backward_key("log_softmax_bwd", grad_output, output, dim, input_dtype)
    call = _LAUNCHES.get(key)
    if call is not None:
        return _repeat(call, (grad_output, output), grad_output.device)
    return _backward_op(grad_output, output, dim, input_dtype, None, True, key)


def log_softmax_backward_data_out(
    grad_output: torch.Tensor,
    output: torch.Tensor,
    dim: int,
    input_dtype: torch.dtype,
    *,
    out: torch.Tensor,
) -> torch.Tensor:
    return _backward_op(grad_output, output, dim, input_dtype, out, True)


# the gate repeats these functions' launches (native_launch.declare_replay)
declare_replay(
    log_softmax,
    log_softmax_backward_data,
    log_softmax_backward_data_out,
    log_softmax_out,
    softmax,
    softmax_backward_data,
    softmax_backward_data_out,
    softmax_out,
)
