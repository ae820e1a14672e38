"""Softmax and log-softmax, forward and backward, over any dim of strided inputs: one
forward and one backward kernel, rows = every index but ``dim``, columns = ``dim``.

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
* Row-shaped tiles when ``dim`` is contiguous (``BLOCK_N`` = the row rounded up to a
  power of 2, 4,096 elements a tile), column-shaped (64 x 64) when it is strided, so the
  contiguous kept dim coalesces.

Computation is float32 for f16/bf16/f32 (float64 for f64), cast once on store. A row of
all ``-inf`` gives NaN, and a NaN anywhere in a row makes the row NaN, as in eager.
``half_to_float`` (f16 in, f32 out) follows the CUDA kernels (eager's CPU kernels reject
it).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.launch import Launcher, cdiv, next_pow2, remember
from opbench.kernels._lib.pointwise import destination
from opbench.kernels._lib.reduction import offsets, row_max, row_sum, vec_of

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

_INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

#: Elements per tile on the GPU (32 fp32 registers per thread at 4 warps).
TILE = 4096
#: Row tile widths when ``dim`` is contiguous: the row rounded up to one of these (adding
#: 128 made 32x12x128x128 f16 slower on the H100, 26.6 -> 31.1 us; eager 18.1); rows
#: longer than the last take the two-pass (online) path. Few widths, few compiles.
ROW_WIDTHS = (16, 64, 256, 1024, 4096)
#: Column tiles when ``dim`` is strided: short rows in one tile, else 64 x 64 tiles.
COL_WIDTHS = (16, 64)
#: Under the interpreter: big tiles, few programs; rows longer than this are two-pass.
_INTERP_TILE = 16384
INTERP_MAX_WIDTH = 4096


# ----------------------------------------------------------------------------- kernels


@triton.jit(do_not_specialize=["M", "N", "md1", "xs0", "xs1", "os0", "os1", "xn", "on"])
def _softmax_kernel(
    x_ptr, o_ptr,
    M: tl.int64, N: tl.int64, md1: tl.int64,
    xs0: tl.int64, xs1: tl.int64, os0: tl.int64, os1: tl.int64,
    xn: tl.int64, on: tl.int64,
    LOG: tl.constexpr, COMPUTE: tl.constexpr, MODE_M: tl.constexpr, UNIT_N: tl.constexpr,
    SINGLE: tl.constexpr, VEC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # sizes and strides arrive divided by VEC: multiplied back, the compiler knows them
    # multiples of VEC and vectorises (reduction.vec_of)
    md1 = md1 * VEC
    xs0 = xs0 * VEC
    xs1 = xs1 * VEC
    os0 = os0 * VEC
    os1 = os1 * VEC
    xn = xn * VEC
    on = on * VEC
    pid = tl.program_id(0).to(tl.int64)
    m = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    mask_m = m < M
    x_m = offsets(m, md1, xs0, xs1, MODE_M)[:, None]
    o_m = offsets(m, md1, os0, os1, MODE_M)[:, None]
    cols = tl.arange(0, BLOCK_N).to(tl.int64)
    if SINGLE:
        mask = mask_m[:, None] & (cols < N)[None, :]
        x_n = cols if UNIT_N else cols * xn
        o_n = cols if UNIT_N else cols * on
        v = tl.load(x_ptr + (x_m + x_n[None, :]), mask=mask, other=float("-inf")).to(COMPUTE)
        mx = row_max(v)[:, None]
        e = tl.exp(v - mx)
        s = row_sum(e)[:, None]
        if LOG:
            y = v - mx - tl.log(s)
        else:
            y = e / s
        tl.store(o_ptr + (o_m + o_n[None, :]), y.to(o_ptr.dtype.element_ty), mask=mask)
    else:
        run_max = tl.full([BLOCK_M], float("-inf"), COMPUTE)
        run_sum = tl.full([BLOCK_M], 0, COMPUTE)
        for k in range(0, N, BLOCK_N):
            n = k + cols
            mask = mask_m[:, None] & (n < N)[None, :]
            x_n = n if UNIT_N else n * xn
            v = tl.load(x_ptr + (x_m + x_n[None, :]), mask=mask, other=float("-inf"))
            v = v.to(COMPUTE)
            new_max = tl.maximum(run_max, row_max(v))
            # a max still at -inf (the row so far all -inf) would give -inf - -inf = NaN
            safe = tl.where(new_max == float("-inf"), 0.0, new_max)
            run_sum = run_sum * tl.exp(run_max - safe) + row_sum(tl.exp(v - safe[:, None]))
            run_max = new_max
        mx = run_max[:, None]
        log_sum = tl.log(run_sum)[:, None]
        inv_sum = 1.0 / run_sum[:, None]
        for k in range(0, N, BLOCK_N):
            n = k + cols
            mask = mask_m[:, None] & (n < N)[None, :]
            x_n = n if UNIT_N else n * xn
            o_n = n if UNIT_N else n * on
            v = tl.load(x_ptr + (x_m + x_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
            if LOG:
                y = v - mx - log_sum
            else:
                y = tl.exp(v - mx) * inv_sum
            tl.store(o_ptr + (o_m + o_n[None, :]), y.to(o_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _bwd_tile(g, y, dot, LOG: tl.constexpr, PRODUCT_FIRST: tl.constexpr):
    """``PRODUCT_FIRST``: softmax's ``g * y - y * dot``, the order eager's persistent
    (short, innermost rows) kernel rounds in; elsewhere eager computes ``y * (g - dot)``.
    They differ by several bf16 ulps where ``g`` and ``dot`` nearly cancel."""
    if LOG:
        r = g - tl.exp(y) * dot
    elif PRODUCT_FIRST:
        r = g * y - y * dot
    else:
        r = y * (g - dot)
    return r


@triton.jit(
    do_not_specialize=[
        "M", "N", "md1", "gs0", "gs1", "ys0", "ys1", "os0", "os1", "gn", "yn", "on"
    ]
)  # fmt: skip
def _softmax_bwd_kernel(
    g_ptr, y_ptr, o_ptr,
    M: tl.int64, N: tl.int64, md1: tl.int64,
    gs0: tl.int64, gs1: tl.int64, ys0: tl.int64, ys1: tl.int64, os0: tl.int64, os1: tl.int64,
    gn: tl.int64, yn: tl.int64, on: tl.int64,
    LOG: tl.constexpr, COMPUTE: tl.constexpr, MODE_M: tl.constexpr, UNIT_N: tl.constexpr,
    SINGLE: tl.constexpr, VEC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    PRODUCT_FIRST: tl.constexpr,
):  # fmt: skip
    """softmax: gi = y * (g - sum(g * y)); log_softmax: gi = g - exp(y) * sum(g)."""
    md1 = md1 * VEC
    gs0 = gs0 * VEC
    gs1 = gs1 * VEC
    ys0 = ys0 * VEC
    ys1 = ys1 * VEC
    os0 = os0 * VEC
    os1 = os1 * VEC
    gn = gn * VEC
    yn = yn * VEC
    on = on * VEC
    pid = tl.program_id(0).to(tl.int64)
    m = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    mask_m = m < M
    g_m = offsets(m, md1, gs0, gs1, MODE_M)[:, None]
    y_m = offsets(m, md1, ys0, ys1, MODE_M)[:, None]
    o_m = offsets(m, md1, os0, os1, MODE_M)[:, None]
    cols = tl.arange(0, BLOCK_N).to(tl.int64)
    if SINGLE:
        mask = mask_m[:, None] & (cols < N)[None, :]
        g_n = cols if UNIT_N else cols * gn
        y_n = cols if UNIT_N else cols * yn
        o_n = cols if UNIT_N else cols * on
        g = tl.load(g_ptr + (g_m + g_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
        y = tl.load(y_ptr + (y_m + y_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
        if LOG:
            dot = row_sum(g)[:, None]
        else:
            dot = row_sum(g * y)[:, None]
        r = _bwd_tile(g, y, dot, LOG, PRODUCT_FIRST)
        tl.store(o_ptr + (o_m + o_n[None, :]), r.to(o_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.full([BLOCK_M, BLOCK_N], 0, COMPUTE)
        for k in range(0, N, BLOCK_N):
            n = k + cols
            mask = mask_m[:, None] & (n < N)[None, :]
            g_n = n if UNIT_N else n * gn
            g = tl.load(g_ptr + (g_m + g_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
            if LOG:
                acc += g
            else:
                y_n = n if UNIT_N else n * yn
                y = tl.load(y_ptr + (y_m + y_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
                acc += g * y
        dot = row_sum(acc)[:, None]
        for k in range(0, N, BLOCK_N):
            n = k + cols
            mask = mask_m[:, None] & (n < N)[None, :]
            g_n = n if UNIT_N else n * gn
            y_n = n if UNIT_N else n * yn
            o_n = n if UNIT_N else n * on
            g = tl.load(g_ptr + (g_m + g_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
            y = tl.load(y_ptr + (y_m + y_n[None, :]), mask=mask, other=0.0).to(COMPUTE)
            r = _bwd_tile(g, y, dot, LOG, PRODUCT_FIRST)
            tl.store(o_ptr + (o_m + o_n[None, :]), r.to(o_ptr.dtype.element_ty), mask=mask)


_forward = Launcher(_softmax_kernel)
_backward = Launcher(_softmax_bwd_kernel)


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


def _plan(
    tensors: list[torch.Tensor], dim: int
) -> tuple[int, int, int, list[int], list[int], int, bool, bool, int, int] | None:
    """``(M, N, MODE_M, per-tensor (s0, s1) flattened, per-tensor column strides, md1,
    UNIT_N, SINGLE, BLOCK_M, BLOCK_N)``, or None when the kept dims merge to more than
    two."""
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
    if _INTERPRETING:
        bn = min(next_pow2(N), INTERP_MAX_WIDTH)
        bm = min(next_pow2(M), max(1, _INTERP_TILE // bn))
    elif unit_n or not kept_unit:
        bn = _pow_at_least(N, ROW_WIDTHS)
        bm = max(1, TILE // bn)
    else:
        bn = _pow_at_least(N, COL_WIDTHS)
        bm = TILE // bn
    single = N <= bn
    flat = [v for p in pairs for v in p]
    return M, N, mode, flat, col, md1, unit_n, single, bm, bn


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
        plan = _plan([*inputs, target], dim)
        if plan is None:  # more than two kept dims after merging: copied, not cached
            inputs = [t.contiguous() for t in inputs]
            target = torch.empty(dest.shape, dtype=dest.dtype, device=dest.device)
            plan = _plan([*inputs, target], dim)
            assert plan is not None
            launch = _launch_args(plan, inputs, target, dim, log, bwd)
            key = None
        else:
            launch = _launch_args(plan, inputs, target, dim, log, bwd)
            remember(_LAUNCHES, layout, launch)
    grid, ints, consts = launch
    (_backward if bwd else _forward)(grid, (*inputs, target, *ints), **consts)
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
#:   the 16 traced softmax cases (launches stubbed, CPU; ``benchmarks/host_profile.py
#:   --python-only``).
_LAUNCHES: dict[tuple, Any] = {}


def _repeat(call: Any, inputs: tuple, device: torch.device, bwd: bool) -> torch.Tensor:
    """A repeat call: the output allocated as the first call's, one launch."""
    shape, stride, dtype, launch = call
    out = torch.empty_strided(shape, stride, dtype=dtype, device=device)
    if launch is not None:
        grid, ints, consts = launch
        (_backward if bwd else _forward)(grid, (*inputs, out, *ints), **consts)
    return out


def _launch_args(
    plan: tuple, inputs: list[torch.Tensor], target: torch.Tensor, dim: int, log: bool,
    bwd: bool,
) -> tuple[tuple[int], tuple[int, ...], dict[str, Any]]:  # fmt: skip
    """Grid, integers and constexprs of the forward or backward kernel's launch, from
    :func:`_plan`'s ``plan`` of these tensors."""
    M, N, mode, flat, col, md1, unit_n, single, bm, bn = plan
    used = ([md1] if mode >= 2 else []) + ([] if mode == 0 else flat) + ([] if unit_n else col)
    vec = vec_of(used, [*inputs, target])
    md1, flat, col = md1 // vec, [v // vec for v in flat], [v // vec for v in col]
    compute = _compute(inputs[0].dtype if not bwd else target.dtype)
    if any(t.dtype == torch.float64 for t in inputs):
        compute = tl.float64
    consts: dict[str, Any] = dict(
        LOG=log, COMPUTE=compute, MODE_M=mode, UNIT_N=unit_n, SINGLE=single, VEC=vec,
        BLOCK_M=bm, BLOCK_N=bn,
    )  # fmt: skip
    if bwd:
        # eager's persistent backward: the softmax dim innermost, at most 1,024 elements
        # and 4 KiB a row (PersistentSoftmax.cuh); it rounds g * y first
        inner = all(s == 1 for s in inputs[0].shape[dim + 1 :])
        consts["PRODUCT_FIRST"] = inner and N <= 1024 and N * inputs[0].element_size() <= 4096
    return (cdiv(M, bm),), (M, N, md1, *flat, *col), consts


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
        return _repeat(call, (self,), self.device, False)
    return _forward_op(self, dim, half_to_float, None, False, key)


def softmax_out(
    self: torch.Tensor, dim: int, half_to_float: bool, *, out: torch.Tensor
) -> torch.Tensor:
    return _forward_op(self, dim, half_to_float, out, False)


def log_softmax(self: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    key = ("log_softmax", self.shape, self.stride(), self.dtype, dim, half_to_float)
    call = _LAUNCHES.get(key)
    if call is not None:
        return _repeat(call, (self,), self.device, False)
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


def softmax_backward_data(
    grad_output: torch.Tensor, output: torch.Tensor, dim: int, input_dtype: torch.dtype
) -> torch.Tensor:
    key = _backward_key("softmax_bwd", grad_output, output, dim, input_dtype)
    call = _LAUNCHES.get(key)
    if call is not None:
        return _repeat(call, (grad_output, output), grad_output.device, True)
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


def log_softmax_backward_data(
    grad_output: torch.Tensor, output: torch.Tensor, dim: int, input_dtype: torch.dtype
) -> torch.Tensor:
    key = _backward_key("log_softmax_bwd", grad_output, output, dim, input_dtype)
    call = _LAUNCHES.get(key)
    if call is not None:
        return _repeat(call, (grad_output, output), grad_output.device, True)
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
