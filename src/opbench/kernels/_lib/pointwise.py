"""The elementwise engine: one flat kernel and one strided kernel, each taking an op's
scalar function as a constexpr. This module plans and launches them and holds the
tunable constants; the kernels themselves (``@triton.jit`` device code) are
:mod:`~opbench.kernels._lib.pointwise_kernels`. The output rules it applies (broadcast
shape, result dtype, in-place and ``out=``) are
:mod:`~opbench.kernels._lib.pointwise_rules`; the scalar math the ops share is
:mod:`~opbench.kernels._lib.device_math`; the ops
themselves, with their ATen-schema entry points, are in
:mod:`~opbench.kernels._lib.arithmetic`,
:mod:`~opbench.kernels._lib.activations`, :mod:`~opbench.kernels._lib.math_ops` and
:mod:`~opbench.kernels._lib.copy`.

How a call is launched (:func:`run`):

* **flat**: every tensor operand is contiguous with the output's shape (or, for a dense
  channels-last output, laid out exactly as it: :data:`FLAT_DENSE_LAYOUTS`), or a single
  element (a 0-dim tensor, read once); Python numbers arrive as scalar arguments. One
  1-D kernel over the elements; this is the common case of the traced models. Its
  programs (:func:`tile_plan`, cached per element count) hold :data:`BLOCK` elements on
  large inputs and fewer, down to one a thread, on small ones, whose time is all fixed
  cost; only a partial last program is masked.
* **strided**: anything else (broadcasting, transposed or sliced inputs, an ``out``
  or ``self`` that is not contiguous). Operands are expanded to the output's shape
  (stride 0 where broadcast, no copy), ordered as the output lies in memory, dimensions
  that are contiguous in every operand are merged (the layout functions are
  :mod:`~opbench.kernels._lib.pointwise_layout`'s), and the kernel maps each output
  index to every operand's offset over at most :data:`MAX_DIMS` merged dimensions; more
  than that splits into launches over the leading dimension.

Every operand is loaded and converted to the compute type first (float32 for f16, bf16
and f32, as eager's ``opmath``; float64 for f64; int64 for integers and bools), so the
interpreter computes bf16 right, and the result is cast once on store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import triton.language as tl

from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING
from opbench.kernels._lib.launch import Launcher, cdiv, next_pow2, remember
from opbench.kernels._lib.pointwise_kernels import _flat_kernel, _identity, _strided_kernel
from opbench.kernels._lib.pointwise_layout import I32_SAFE, index_type
from opbench.kernels._lib.pointwise_layout import dense_channels_last as _dense_channels_last
from opbench.kernels._lib.pointwise_layout import expanded_strides as _expanded_strides
from opbench.kernels._lib.pointwise_layout import memory_order as _memory_order
from opbench.kernels._lib.pointwise_layout import merge_dims as _merge_dims
from opbench.kernels._lib.pointwise_rules import (
    FLOATS,
    broadcast_shape,
    destination,
    layout_source,
    require_float,
    result_type,
)

__all__ = [
    "I32_SAFE",
    "IDENTITY",
    "MAX_DIMS",
    "backward_op",
    "compute_type",
    "elementwise",
    "run",
    "tile_plan",
    "unary",
]

#: Merged dimensions the strided kernel indexes; more split into several launches.
MAX_DIMS = 4
#: Elements per program of the flat and strided kernels on large inputs, in
#: :data:`NUM_WARPS` warps (8 a thread: one 16-byte access per f16 operand): with int32
#: indexing 0.98 of copy bandwidth for a 256 MiB f16 add on the H100; the block/warp sweep
#: (benchmarks/reproduce/launch_profile.py --sweep, 1,024 to 16,384 x 4 to 16 warps) found no
#: setting clearly better (0.93-1.0 across them, within run-to-run noise).
BLOCK = 1024
NUM_WARPS = 4
#: Small inputs get smaller programs (:func:`tile_plan`): a few-µs op on 1K elements is
#: all fixed cost, and the part that grows with the tile is one warp's chain of
#: instructions: in a 1,024-element program a 128-element f16 rsqrt ran eight unrolled
#: sqrt-and-divide sequences in its one live warp (246 sm_90 instructions, 104 in a
#: 128-element program) and took 5.05 µs on the H100 against eager's 4.44 and FlagGems'
#: 4.25 (tiles of the input's power of two up to 512, 4 warps: one element a thread
#: there). False: every input in :data:`BLOCK`-element programs (the rule before, a
#: sweep's baseline).
SMALL_TILES = True
#: With :data:`SMALL_TILES`, an input is spread over up to this many programs (one an SM
#: of the H100's 132) before a program takes more than :data:`MIN_BLOCK` elements ...
SPREAD = 132
#: ... and no program holds fewer (but for inputs smaller than that: the next power of
#: two of the input, down to a single element for a 0-dim tensor) ...
MIN_BLOCK = 128
#: ... and a program below :data:`BLOCK` elements has ``block / (32 * SMALL_EPT)``
#: warps (1 to :data:`NUM_WARPS`): SMALL_EPT elements a thread.
SMALL_EPT = 1
#: Small programs under the interpreter: it runs programs one by one in Python.
_INTERP_BLOCK = 4096
_INTERP_SPREAD = 4


# Operand modes (constexpr): how the kernel gets each of up to three operands.
ABSENT, TENSOR, ELEMENT, NUMBER = 0, 1, 2, 3


# ----------------------------------------------------------------------------- launching

_flat = Launcher(_flat_kernel, specialize=("n",))
_strided = Launcher(_strided_kernel)


_FLOAT_COMPUTE = {torch.float16: tl.float32, torch.bfloat16: tl.float32, torch.float32: tl.float32}


_COMPUTE = {
    **_FLOAT_COMPUTE, torch.float64: tl.float64, torch.int8: tl.int64, torch.int16: tl.int64,
    torch.int32: tl.int64, torch.int64: tl.int64, torch.uint8: tl.int64, torch.bool: tl.int64,
}  # fmt: skip


def compute_type(dtype: torch.dtype) -> Any:
    """The type the kernel computes in for a result of ``dtype`` (eager's opmath)."""
    hit = _COMPUTE.get(dtype)
    if hit is not None:
        return hit
    if dtype.is_complex or dtype.is_floating_point:  # complex, float8
        raise NotImplementedError(f"no Triton kernel for {dtype}")
    return tl.int64


#: The largest program: :mod:`~opbench.kernels._lib.copy`'s ``cat`` tiles by it.
_BLOCK_NOW = _INTERP_BLOCK if _INTERPRETING else BLOCK


def tile_plan(n: int) -> tuple[int, int, int]:
    """``(grid, block, warps)`` for ``n >= 1`` elements, from the module's constants as
    they are now (a sweep sets them before the first call): :data:`BLOCK`-element
    programs of :data:`NUM_WARPS` warps where the input fills :data:`SPREAD` of them;
    below that, programs of ``n / SPREAD`` elements rounded up to a power of two, at least
    :data:`MIN_BLOCK` and at most ``n``'s, in ``block / (32 * SMALL_EPT)`` warps."""
    top, spread = (_INTERP_BLOCK, _INTERP_SPREAD) if _INTERPRETING else (BLOCK, SPREAD)
    block, warps = top, NUM_WARPS
    if SMALL_TILES:
        block = min(top, max(MIN_BLOCK, next_pow2(cdiv(n, spread))), next_pow2(n))
        if block < top:
            warps = max(1, min(NUM_WARPS, block // (32 * SMALL_EPT)))
    return cdiv(n, block), block, warps


#: element count -> the flat kernel's launch: ``(grid, block, warps, index type)``
#: (:func:`tile_plan`); one dict look-up on the host path.
_FLAT_PLANS: dict[int, tuple[tuple[int], int, int, Any]] = {}


def _flat_plan(n: int) -> tuple[tuple[int], int, int, Any]:
    grid, block, warps = tile_plan(n)
    plan = ((grid,), block, warps, tl.int32 if n <= I32_SAFE else tl.int64)
    return remember(_FLAT_PLANS, n, plan)


def _all_flat(operands: Sequence[Any], out: torch.Tensor) -> bool:
    """Every operand a contiguous tensor of ``out``'s shape on its device type, and
    ``out`` contiguous: one flat launch, no stride tables."""
    if not out.is_contiguous():
        return False
    shape, cuda = out.shape, out.is_cuda
    for t in operands:
        if type(t) is not torch.Tensor or t.shape != shape or t.is_cuda != cuda:
            return False
        if not t.is_contiguous() or t.dim() == 0:
            return False
    return True


def run(
    fn: Any,
    operands: Sequence[torch.Tensor | float | int | bool],
    out: torch.Tensor,
    compute: Any,
    p0: float = 0.0,
    p1: float = 0.0,
) -> torch.Tensor:
    """Compute ``fn`` elementwise over up to three ``operands`` into ``out`` (already of
    the broadcast shape and result dtype); returns ``out``."""
    n = out.numel()
    if n == 0:
        return out
    if _all_flat(operands, out):  # the common case, without building the general tables
        a = operands[0]
        b = operands[1] if len(operands) > 1 else a
        c = operands[2] if len(operands) > 2 else a
        grid, block, warps, idx = _FLAT_PLANS.get(n) or _flat_plan(n)
        _flat(
            grid, (a, b, c, out, n, 0.0, 0.0, 0.0, float(p0), float(p1)),
            FN=fn, A=TENSOR, B=TENSOR if len(operands) > 1 else ABSENT,
            C=TENSOR if len(operands) > 2 else ABSENT, COMPUTE=compute, BLOCK=block,
            IDX=idx, num_warps=warps,
        )  # fmt: skip
        return out
    modes, tensors = _modes(operands, out)
    numbers = [0.0, 0.0, 0.0]
    for i, m in enumerate(modes):
        if m == NUMBER:
            op = operands[i]
            numbers[i] = op.item() if isinstance(op, torch.Tensor) else op
    shape = out.shape
    flat = _flat_layout(modes, tensors, out)
    a, b, c = tensors
    A, B, C = modes
    na, nb, nc = float(numbers[0]), float(numbers[1]), float(numbers[2])
    if flat:
        grid, block, warps, idx = _FLAT_PLANS.get(n) or _flat_plan(n)
        _flat(
            grid, (a, b, c, out, n, na, nb, nc, float(p0), float(p1)),
            FN=fn, A=A, B=B, C=C, COMPUTE=compute, BLOCK=block, IDX=idx,
            num_warps=warps,
        )  # fmt: skip
        return out
    key = (
        out.shape, out.stride(), *modes,
        *((t.shape, t.stride()) for m, t in zip(modes, tensors) if m == TENSOR),
    )  # fmt: skip
    plan = _STRIDED_PLANS.get(key)
    if plan is None:
        plan = remember(_STRIDED_PLANS, key, _strided_plan(tuple(shape), modes, tensors, out, n))
    if plan is _SPLIT:
        return _run_split(fn, operands, out, compute, p0, p1, modes, tensors, numbers)
    ints, idx, ndim, grid, block, warps = plan
    _strided(
        grid, (a, b, c, out, *ints, na, nb, nc, float(p0), float(p1)),
        FN=fn, A=A, B=B, C=C, COMPUTE=compute, BLOCK=block, IDX=idx, NDIM=ndim,
        num_warps=warps,
    )  # fmt: skip
    return out


def _modes(operands: Sequence[Any], out: torch.Tensor) -> tuple[list[int], list[torch.Tensor]]:
    """Each of three operand slots' mode, and the tensor its pointer argument gets
    (``out`` where none is read): a 0-dim tensor on another device than ``out`` (a CPU
    scalar beside CUDA tensors) is passed by value, a 0-dim tensor beside it read once."""
    modes = [ABSENT, ABSENT, ABSENT]
    tensors = [out, out, out]
    for i, op in enumerate(operands):
        if isinstance(op, torch.Tensor):
            if op.device != out.device:
                modes[i] = NUMBER
            else:
                modes[i] = ELEMENT if op.numel() == 1 and op.dim() == 0 else TENSOR
                tensors[i] = op
        else:
            modes[i] = NUMBER
    return modes, tensors


#: Whether a channels-last result whose full operands are laid out exactly as it is
#: (``relu`` of a channels-last image, the sum of two) takes the flat kernel over its
#: memory, as a contiguous one does. Why: such calls went to the strided kernel, which
#: walks them in memory order as one dimension of unit stride but cannot prove the stride
#: at compile time, so it loads and stores 2 bytes at a time: ``relu`` of a channels-last
#: ``[32, 256, 28, 28]`` f16 5.53 us, eager 5.19; the sum of two such images 7.52 us, eager
#: 6.48 (H200, 2026-12-02, ``pointwise-layouts-h200-2026-12-02.json``). Untimed with it;
#: ``benchmarks/probes/pointwise_layouts.py`` times both.
FLAT_DENSE_LAYOUTS = True


def _flat_layout(modes: Sequence[int], tensors: Sequence[torch.Tensor], out: torch.Tensor) -> bool:
    """Whether the flat kernel serves the call: ``out`` contiguous and every full tensor
    operand contiguous of its shape, or (:data:`FLAT_DENSE_LAYOUTS`) ``out`` dense
    channels-last and every full tensor operand of its shape and strides (element ``k``
    of each one's memory is then element ``k`` of the others')."""
    shape = out.shape
    if out.is_contiguous():
        return all(m != TENSOR or (t.shape == shape and t.is_contiguous())
                   for m, t in zip(modes, tensors))  # fmt: skip
    if not (FLAT_DENSE_LAYOUTS and _dense_channels_last(out)):
        return False
    strides = out.stride()
    return all(m != TENSOR or (t.shape == shape and t.stride() == strides)
               for m, t in zip(modes, tensors))  # fmt: skip


#: (output layout, operand modes and layouts) -> the strided kernel's integers, index
#: type and merged rank: planning (expanded strides, merged dims) cost more host time
#: than the launch, and models call the same layouts over and over.
_STRIDED_PLANS: dict[tuple, Any] = {}
_SPLIT = object()  # more merged dims than the kernel indexes: launches per leading index


def _strided_plan(
    shape: tuple[int, ...], modes: list[int], tensors: list[torch.Tensor], out: torch.Tensor,
    n: int,
) -> Any:  # fmt: skip
    strides = [
        _expanded_strides(t, shape) if m == TENSOR else [0] * len(shape)
        for m, t in zip(modes, tensors)
    ]
    strides.append(list(out.stride()))
    order = _memory_order(out.stride())
    shape = tuple(shape[i] for i in order)
    strides = [[st[i] for i in order] for st in strides]
    mshape, mstrides = _merge_dims(shape, strides)
    if len(mshape) > MAX_DIMS:
        return _SPLIT
    pad = MAX_DIMS - len(mshape)
    dims = [1] * pad + mshape
    st = [[0] * pad + s for s in mstrides]
    ints = (n, dims[1], dims[2], dims[3], *st[0], *st[1], *st[2], *st[3])
    grid, block, warps = tile_plan(n)
    return ints, index_type(n, dims, st), max(1, len(mshape)), (grid,), block, warps


def _run_split(
    fn: Any, operands: Sequence[Any], out: torch.Tensor, compute: Any, p0: float, p1: float,
    modes: list[int], tensors: list[torch.Tensor], numbers: list[float],
) -> torch.Tensor:  # fmt: skip
    """More merged dims than :data:`MAX_DIMS`: one launch per index of the leading
    dimension, on views (no copies)."""
    shape = tuple(out.shape)
    lead = next(i for i, s in enumerate(shape) if s != 1)
    for i in range(shape[lead]):
        sub = [
            t.expand(shape).select(lead, i) if m == TENSOR else (t if m == ELEMENT else v)
            for m, t, v in zip(modes, tensors, numbers)
        ][: len(operands)]
        run(fn, sub, out.select(lead, i), compute, p0, p1)
    return out


def elementwise(
    fn: Any,
    operands: Sequence[Any],
    dtype: torch.dtype,
    *,
    p0: float = 0.0,
    p1: float = 0.0,
    out: torch.Tensor | None = None,
    inplace: torch.Tensor | None = None,
    compute_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The op ``fn`` over broadcast ``operands`` with a result of ``dtype``, written to a
    new tensor, ``out`` or ``inplace``; returns that tensor.

    Three paths, cheapest first (µs of Python per call on the traced cases, CPU, launches
    stubbed: ``benchmarks/reproduce/host_profile.py --python-only``; before -> after the split, with
    the ops' own checks trimmed): :func:`_flat_call` for a contiguous first operand whose
    fellow operands are contiguous tensors of its shape, 0-dim tensors or Python numbers
    (f16 add.Tensor 6.9 -> 4.1, add.Scalar 8.4 -> 3.8, div by a 0-dim tensor 10.3 ->
    4.0); :func:`_planned` for any other new or in-place result, its broadcast shape,
    allocation and kernel plan cached on the operands' layouts (div [4, 512, 768] /
    [4, 512, 1] 13.4 -> 5.7, ``where`` with a broadcast mask and a 0-dim tensor 14.0 ->
    6.1); ``out=`` through :func:`destination` and :func:`run`."""
    cdtype = compute_dtype or dtype
    compute = _COMPUTE.get(cdtype)
    if compute is None:
        compute = compute_type(cdtype)
    if out is None:
        first = operands[0]
        if inplace is None or inplace is first:
            if type(first) is torch.Tensor and first.is_contiguous():
                dest = _flat_call(fn, operands, first, dtype, compute, p0, p1, inplace)
                if dest is not None:
                    return dest
            return _planned(fn, operands, dtype, compute, p0, p1, inplace)
    shape = broadcast_shape(*operands)
    dest = destination(shape, dtype, operands, out=out, inplace=inplace)
    return run(fn, operands, dest, compute, p0, p1)


def _flat_call(
    fn: Any, operands: Sequence[Any], first: torch.Tensor, dtype: torch.dtype, compute: Any,
    p0: float, p1: float, inplace: torch.Tensor | None,
) -> torch.Tensor | None:  # fmt: skip
    """One flat launch when ``first`` is contiguous and every other operand is a
    contiguous tensor of its shape on its device type, a 0-dim tensor or a Python number;
    None (nothing done) otherwise. The result is contiguous with ``first``'s shape, as
    :func:`destination` would allocate it."""
    shape = first.shape
    ptrs = [first, first, first]
    nums = [0.0, 0.0, 0.0]
    modes = [TENSOR, ABSENT, ABSENT]
    for i in range(1, len(operands)):
        t = operands[i]
        tt = type(t)
        if tt is torch.Tensor:
            if t.shape == shape:
                if not t.is_contiguous() or t.is_cuda != first.is_cuda:
                    return None
                modes[i] = TENSOR if shape else ELEMENT
                ptrs[i] = t
            elif t.dim() == 0:
                if t.device == first.device:
                    modes[i] = ELEMENT
                    ptrs[i] = t
                else:  # a 0-dim CPU tensor beside CUDA operands: its value
                    modes[i] = NUMBER
                    nums[i] = float(t.item())
            else:
                return None
        elif tt is float or tt is int or tt is bool:
            modes[i] = NUMBER
            nums[i] = float(t)
        else:
            return None
    if inplace is None:
        # empty_like(contiguous) is torch.empty(shape) for 0.6-1.3 µs less argument
        # parsing (1.07 against 1.63 with a tuple, 2.35 with a torch.Size; CPU, timeit)
        dest = torch.empty_like(first, dtype=dtype, memory_format=torch.contiguous_format)
    elif dtype == first.dtype or torch.can_cast(dtype, first.dtype):
        dest = first
    else:
        return None  # :func:`destination` raises eager's error
    n = first.numel()
    if n:
        grid, block, warps, idx = _FLAT_PLANS.get(n) or _flat_plan(n)
        _flat(
            grid, (first, ptrs[1], ptrs[2], dest, n, 0.0, nums[1], nums[2], float(p0), float(p1)),
            FN=fn, A=TENSOR if shape else ELEMENT, B=modes[1], C=modes[2], COMPUTE=compute,
            BLOCK=block, IDX=idx, num_warps=warps,
        )  # fmt: skip
    return dest


#: (in-place?, each operand's (shape, strides, device) or None for a number) -> the
#: result's shape, allocation and kernel plan (:func:`_new_plan`). A hit skips the
#: broadcast, layout and stride work: 13.4 -> 5.7 µs for a broadcast f32 div
#: [4, 512, 768] / [4, 512, 1] (host_profile.py --python-only, CPU).
_PLANS: dict[tuple, Any] = {}


def _planned(
    fn: Any, operands: Sequence[Any], dtype: torch.dtype, compute: Any, p0: float, p1: float,
    inplace: torch.Tensor | None,
) -> torch.Tensor:  # fmt: skip
    """A new or in-place (``inplace is operands[0]``) result, planned once per layout."""
    key: list[Any] = [inplace is None]
    for t in operands:
        if isinstance(t, torch.Tensor):
            key.append((t.shape, t.stride(), t.device))
        else:
            key.append(None)
    k = tuple(key)
    plan = _PLANS.get(k)
    if plan is None:
        plan = remember(_PLANS, k, _new_plan(operands, dtype, inplace))
    shape, like, fmt, device, n, modes, strided = plan
    if inplace is not None:
        if dtype != inplace.dtype and not torch.can_cast(dtype, inplace.dtype):
            destination(shape, dtype, operands, inplace=inplace)  # raises eager's error
        dest = inplace
    elif like >= 0:
        dest = torch.empty_like(operands[like], dtype=dtype, memory_format=fmt)
    else:
        dest = torch.empty(shape, dtype=dtype, device=device)
    if n == 0:
        return dest
    if strided is _SPLIT:
        return run(fn, operands, dest, compute, p0, p1)
    args: list[Any] = [dest, dest, dest, dest]
    numbers = [0.0, 0.0, 0.0]
    for i, t in enumerate(operands):
        if modes[i] == NUMBER:
            numbers[i] = float(t.item() if isinstance(t, torch.Tensor) else t)
        else:
            args[i] = t
    A, B, C = modes
    if strided is None:
        grid, block, warps, idx = _FLAT_PLANS.get(n) or _flat_plan(n)
        _flat(
            grid, (*args, n, *numbers, float(p0), float(p1)),
            FN=fn, A=A, B=B, C=C, COMPUTE=compute, BLOCK=block, IDX=idx,
            num_warps=warps,
        )  # fmt: skip
    else:
        ints, idx, ndim, grid, block, warps = strided
        _strided(
            grid, (*args, *ints, *numbers, float(p0), float(p1)),
            FN=fn, A=A, B=B, C=C, COMPUTE=compute, BLOCK=block, IDX=idx, NDIM=ndim,
            num_warps=warps,
        )  # fmt: skip
    return dest


def _new_plan(operands: Sequence[Any], dtype: torch.dtype, inplace: torch.Tensor | None) -> Any:
    """What :func:`_planned` caches: the broadcast shape, the operand whose layout a new
    result copies (-1: contiguous), the device, the element count, each operand's mode
    and the strided kernel's plan (None: flat; ``_SPLIT``: :func:`run` splits it).
    Computed on a real destination, so errors and layouts are :func:`destination`'s."""
    shape = broadcast_shape(*operands)
    first = operands[0]
    like, fmt = -1, torch.contiguous_format
    if inplace is not None:
        dest = destination(shape, dtype, operands, inplace=inplace)
    elif (
        type(first) is torch.Tensor
        and first.dim() > 0
        and first.is_contiguous()
        and all(type(t) is not torch.Tensor or t.shape == first.shape for t in operands)
    ):
        dest = torch.empty(shape, dtype=dtype, device=first.device)
    else:
        dest = destination(shape, dtype, operands)
        if len(shape) in (4, 5):
            src = layout_source(shape, operands)
            if src is not None:
                like = next(i for i, t in enumerate(operands) if t is src)
                fmt = torch.preserve_format
    if like < 0 and inplace is None:
        # a contiguous result like a full-shape operand: empty_like is 0.6 µs cheaper
        # than torch.empty(shape) (see :func:`_flat_call`)
        like = next(
            (
                i
                for i, t in enumerate(operands)
                if type(t) is torch.Tensor and t.shape == shape and t.device == dest.device
            ),
            -1,
        )
    modes, tensors = _modes(operands, dest)
    n = dest.numel()
    strided = None
    if not _flat_layout(modes, tensors, dest):
        strided = _strided_plan(tuple(shape), modes, tensors, dest, n)
    return shape, like, fmt, dest.device, n, tuple(modes), strided


# ----------------------------------------------------------------------------- for op modules
# ATen entry points pass ``out``/``inplace`` to select the variant: a new tensor, ``self``
# (``<op>_``) or ``out`` (``<op>.out``).


def unary(fn: Any, self: torch.Tensor, out: Any, inplace: Any, *, op: str | None = None,
          floats_only: bool = True, p0: float = 0.0, p1: float = 0.0) -> torch.Tensor:  # fmt: skip
    """A one-input op keeping ``self``'s dtype; declined (as eager words it) for bools, and
    for integers when the op is defined on floating types only."""
    dtype = self.dtype
    if dtype not in FLOATS:
        name = op or fn.__name__.strip("_")
        if floats_only:
            require_float(name, self)
        elif dtype == torch.bool:
            raise NotImplementedError(f"\"{name}\" not implemented for 'Bool'")
    return elementwise(fn, [self], dtype, out=out, inplace=inplace, p0=p0, p1=p1)


def backward_op(fn: Any, grad: torch.Tensor, other: torch.Tensor, out: Any,
              p0: float = 0.0, p1: float = 0.0) -> torch.Tensor:  # fmt: skip
    dtype = result_type(grad, other)
    if dtype not in FLOATS and not dtype.is_floating_point:
        raise NotImplementedError(f"{fn.__name__.strip('_')} on integer tensors")
    return elementwise(fn, [grad, other], dtype, p0=p0, p1=p1, out=out)


#: the identity, for the copies of :mod:`opbench.kernels._lib.copy`
IDENTITY = _identity
