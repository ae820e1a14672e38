"""The elementwise engine: one flat kernel and one strided kernel, each taking an op's
scalar function as a constexpr, the output rules (broadcast shape, dtype casts, in-place
and ``out=``). The scalar math the ops share is :mod:`~opbench.kernels._lib.device_math`;
the ops themselves, with their ATen-schema entry points, are in
:mod:`~opbench.kernels._lib.arithmetic`,
:mod:`~opbench.kernels._lib.activations`, :mod:`~opbench.kernels._lib.math_ops` and
:mod:`~opbench.kernels._lib.copy`.

How a call is launched (:func:`run`):

* **flat**: every tensor operand is contiguous with the output's shape, or a single
  element (a 0-dim tensor, read once); Python numbers arrive as scalar arguments. One
  1-D kernel over the elements; this is the common case of the traced models.
* **strided**: anything else (broadcasting, transposed or sliced inputs, an ``out``
  or ``self`` that is not contiguous). Operands are expanded to the output's shape
  (stride 0 where broadcast, no copy), dimensions that are contiguous in every operand
  are merged, and the kernel maps each output index to every operand's offset over at
  most :data:`MAX_DIMS` merged dimensions; more than that splits into launches over the
  leading dimension.

Every operand is loaded and converted to the compute type first (float32 for f16, bf16
and f32, as eager's ``opmath``; float64 for f64; int64 for integers and bools), so the
interpreter computes bf16 right, and the result is cast once on store.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.launch import Launcher, cdiv

__all__ = [
    "IDENTITY",
    "MAX_DIMS",
    "backward_op",
    "check_number",
    "compute_type",
    "destination",
    "dtype_name",
    "elementwise",
    "require_float",
    "run",
    "unary",
]

#: Merged dimensions the strided kernel indexes; more split into several launches.
MAX_DIMS = 4
#: Elements per program of the flat kernel, 4 warps: with int32 indexing 0.98 of copy
#: bandwidth for a 256 MiB f16 add on the H100; the block/warp sweep
#: (benchmarks/launch_profile.py --sweep, 1,024 to 16,384 x 4 to 16 warps) found no
#: setting clearly better (0.93-1.0 across them, within run-to-run noise).
BLOCK = 1024
#: Small programs under the interpreter: it runs programs one by one in Python.
_INTERP_BLOCK = 4096

_INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

# Operand modes (constexpr): how the kernel gets each of up to three operands.
ABSENT, TENSOR, ELEMENT, NUMBER = 0, 1, 2, 3


# ----------------------------------------------------------------------------- kernels


@triton.jit
def _identity(a, b, c, p0, p1):
    return a


@triton.jit
def _operand(
    ptr, offs, mask, number, MODE: tl.constexpr, COMPUTE: tl.constexpr, BLOCK: tl.constexpr
):
    if MODE == 1:
        v = tl.load(ptr + offs, mask=mask).to(COMPUTE)
    elif MODE == 2:
        v = tl.load(ptr + offs * 0, mask=mask).to(COMPUTE)  # one element, broadcast
    else:
        v = tl.full([BLOCK], 0, COMPUTE) + tl.cast(number, COMPUTE)
    return v


@triton.jit
def _flat_kernel(
    a_ptr, b_ptr, c_ptr, out_ptr,
    n: tl.int64,
    na: tl.float64, nb: tl.float64, nc: tl.float64, p0: tl.float64, p1: tl.float64,
    FN: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK: tl.constexpr, IDX: tl.constexpr,
):  # fmt: skip
    """``IDX``: the index type, int32 whenever every offset fits (see :func:`index_type`)."""
    offs = tl.program_id(0).to(IDX) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n.to(IDX)
    a = _operand(a_ptr, offs, mask, na, A, COMPUTE, BLOCK)
    b = a
    c = a
    if B != 0:
        b = _operand(b_ptr, offs, mask, nb, B, COMPUTE, BLOCK)
    if C != 0:
        c = _operand(c_ptr, offs, mask, nc, C, COMPUTE, BLOCK)
    y = FN(a, b, c, tl.cast(p0, COMPUTE), tl.cast(p1, COMPUTE))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _offset(i0, i1, i2, i3, s0, s1, s2, s3, IDX: tl.constexpr):
    return i0 * s0.to(IDX) + i1 * s1.to(IDX) + i2 * s2.to(IDX) + i3 * s3.to(IDX)


@triton.jit(
    do_not_specialize=[
        "n",
        "d1",
        "d2",
        "d3",
        "as0",
        "as1",
        "as2",
        "as3",
        "bs0",
        "bs1",
        "bs2",
        "bs3",
        "cs0",
        "cs1",
        "cs2",
        "cs3",
        "os0",
        "os1",
        "os2",
        "os3",
    ]
)
def _strided_kernel(
    a_ptr, b_ptr, c_ptr, out_ptr,
    n: tl.int64, d1: tl.int64, d2: tl.int64, d3: tl.int64,
    as0: tl.int64, as1: tl.int64, as2: tl.int64, as3: tl.int64,
    bs0: tl.int64, bs1: tl.int64, bs2: tl.int64, bs3: tl.int64,
    cs0: tl.int64, cs1: tl.int64, cs2: tl.int64, cs3: tl.int64,
    os0: tl.int64, os1: tl.int64, os2: tl.int64, os3: tl.int64,
    na: tl.float64, nb: tl.float64, nc: tl.float64, p0: tl.float64, p1: tl.float64,
    FN: tl.constexpr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK: tl.constexpr, IDX: tl.constexpr, NDIM: tl.constexpr,
):  # fmt: skip
    """``IDX`` as in the flat kernel: 64-bit division is emulated on the GPU, so the
    index arithmetic below costs several times more in int64. ``NDIM``: the merged rank
    (1-4; the shape is padded with leading 1s): one division per dim past the first,
    none for one strided dim (each costs some 20 instructions an element, which made a
    broadcast f16 ``div`` over [32768, 196] compute-bound)."""
    idx = tl.program_id(0).to(IDX) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n.to(IDX)
    # the output index in the merged shape (d0, d1, d2, d3), innermost last
    i0 = 0
    i1 = 0
    i2 = 0
    if NDIM == 1:
        i3 = idx
    else:
        r = idx // d3.to(IDX)
        i3 = idx - r * d3.to(IDX)
        if NDIM == 2:
            i2 = r
        else:
            r2 = r // d2.to(IDX)
            i2 = r - r2 * d2.to(IDX)
            if NDIM == 3:
                i1 = r2
            else:
                i0 = r2 // d1.to(IDX)
                i1 = r2 - i0 * d1.to(IDX)
    a = _operand(
        a_ptr, _offset(i0, i1, i2, i3, as0, as1, as2, as3, IDX), mask, na, A, COMPUTE, BLOCK
    )
    b = a
    c = a
    if B != 0:
        b = _operand(
            b_ptr, _offset(i0, i1, i2, i3, bs0, bs1, bs2, bs3, IDX), mask, nb, B, COMPUTE, BLOCK
        )
    if C != 0:
        c = _operand(
            c_ptr, _offset(i0, i1, i2, i3, cs0, cs1, cs2, cs3, IDX), mask, nc, C, COMPUTE, BLOCK
        )
    y = FN(a, b, c, tl.cast(p0, COMPUTE), tl.cast(p1, COMPUTE))
    out_offs = _offset(i0, i1, i2, i3, os0, os1, os2, os3, IDX)
    tl.store(out_ptr + out_offs, y.to(out_ptr.dtype.element_ty), mask=mask)


_flat = Launcher(_flat_kernel, specialize=("n",))
_strided = Launcher(_strided_kernel)


# ----------------------------------------------------------------------------- launching

_FLOAT_COMPUTE = {torch.float16: tl.float32, torch.bfloat16: tl.float32, torch.float32: tl.float32}


def compute_type(dtype: torch.dtype) -> Any:
    """The type the kernel computes in for a result of ``dtype`` (eager's opmath)."""
    if dtype in _FLOAT_COMPUTE:
        return tl.float32
    if dtype == torch.float64:
        return tl.float64
    if dtype.is_complex or dtype.is_floating_point:  # complex, float8
        raise NotImplementedError(f"no Triton kernel for {dtype}")
    return tl.int64


def _merge_dims(
    shape: Sequence[int], strides: list[list[int]]
) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that are contiguous in every operand."""
    dims = [i for i, s in enumerate(shape) if s != 1]
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for i in dims:
        mergeable = bool(out_shape) and all(
            out_strides[k][-1] == strides[k][i] * shape[i] for k in range(len(strides))
        )
        if mergeable:
            out_shape[-1] *= shape[i]
            for k in range(len(strides)):
                out_strides[k][-1] = strides[k][i]
        else:
            out_shape.append(shape[i])
            for k in range(len(strides)):
                out_strides[k].append(strides[k][i])
    return out_shape, out_strides


def _expanded_strides(t: torch.Tensor, shape: Sequence[int]) -> list[int]:
    """``t``'s strides when broadcast to ``shape`` (0 where broadcast)."""
    nd = len(shape)
    pad = nd - t.dim()
    out = [0] * nd
    for i in range(t.dim()):
        out[pad + i] = 0 if t.shape[i] == 1 and shape[pad + i] != 1 else t.stride(i)
    return out


_BLOCK_NOW = _INTERP_BLOCK if _INTERPRETING else BLOCK
#: Largest element count (and offset) indexed in int32: the last program's indices run
#: up to a block past the end before the mask.
_I32_SAFE = 2**31 - 1 - 16384


def index_type(n: int, dims: Sequence[int], strides: Sequence[Sequence[int]]) -> Any:
    """``tl.int32`` when ``n`` and every operand's largest offset over ``dims`` fit in it
    (int32 index arithmetic: 0.96-0.99 of copy bandwidth for a 256 MiB add on the H100
    against 0.92 in int64, benchmarks/launch_profile.py --sweep), else ``tl.int64``."""
    if n > _I32_SAFE:
        return tl.int64
    for st in strides:
        if sum((d - 1) * abs(s) for d, s in zip(dims, st)) > _I32_SAFE:
            return tl.int64
    return tl.int32


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
        _flat(
            (cdiv(n, _BLOCK_NOW),),
            (a, b, c, out, n, 0.0, 0.0, 0.0, float(p0), float(p1)),
            FN=fn, A=TENSOR, B=TENSOR if len(operands) > 1 else ABSENT,
            C=TENSOR if len(operands) > 2 else ABSENT, COMPUTE=compute, BLOCK=_BLOCK_NOW,
            IDX=tl.int32 if n <= _I32_SAFE else tl.int64,
        )  # fmt: skip
        return out
    modes: list[int] = []
    numbers: list[float] = []
    tensors: list[torch.Tensor] = []
    for op in operands:
        if isinstance(op, torch.Tensor):
            if op.device != out.device:  # a 0-dim CPU tensor beside CUDA operands
                modes.append(NUMBER)
                numbers.append(op.item())
                tensors.append(out)
            else:
                modes.append(ELEMENT if op.numel() == 1 and op.dim() == 0 else TENSOR)
                numbers.append(0.0)
                tensors.append(op)
        else:
            modes.append(NUMBER)
            numbers.append(op)
            tensors.append(out)  # never read
    while len(modes) < 3:
        modes.append(ABSENT)
        numbers.append(0.0)
        tensors.append(out)
    block = _INTERP_BLOCK if _INTERPRETING else BLOCK
    shape = out.shape
    flat = out.is_contiguous()
    if flat:
        for m, t in zip(modes, tensors):
            if m == TENSOR and not (t.shape == shape and t.is_contiguous()):
                flat = False
                break
    a, b, c = tensors
    A, B, C = modes
    na, nb, nc = float(numbers[0]), float(numbers[1]), float(numbers[2])
    if flat:
        _flat(
            (cdiv(n, block),),
            (a, b, c, out, n, na, nb, nc, float(p0), float(p1)),
            FN=fn, A=A, B=B, C=C, COMPUTE=compute, BLOCK=block,
            IDX=tl.int32 if n <= _I32_SAFE else tl.int64,
        )  # fmt: skip
        return out
    key = (
        out.shape, out.stride(), *modes,
        *((t.shape, t.stride()) for m, t in zip(modes, tensors) if m == TENSOR),
    )  # fmt: skip
    plan = _STRIDED_PLANS.get(key)
    if plan is None:
        plan = _strided_plan(tuple(shape), modes, tensors, out, n)
        if len(_STRIDED_PLANS) >= _PLAN_LIMIT:
            _STRIDED_PLANS.clear()
        _STRIDED_PLANS[key] = plan
    if plan is _SPLIT:
        return _run_split(fn, operands, out, compute, p0, p1, modes, tensors, numbers)
    ints, idx, ndim = plan
    _strided(
        (cdiv(n, block),),
        (a, b, c, out, *ints, na, nb, nc, float(p0), float(p1)),
        FN=fn, A=A, B=B, C=C, COMPUTE=compute, BLOCK=block, IDX=idx, NDIM=ndim,
    )  # fmt: skip
    return out


#: (output layout, operand modes and layouts) -> the strided kernel's integers, index
#: type and merged rank: planning (expanded strides, merged dims) cost more host time
#: than the launch, and models call the same layouts over and over.
_STRIDED_PLANS: dict[tuple, Any] = {}
_PLAN_LIMIT = 4096
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
    mshape, mstrides = _merge_dims(shape, strides)
    if len(mshape) > MAX_DIMS:
        return _SPLIT
    pad = MAX_DIMS - len(mshape)
    dims = [1] * pad + mshape
    st = [[0] * pad + s for s in mstrides]
    ints = (n, dims[1], dims[2], dims[3], *st[0], *st[1], *st[2], *st[3])
    return ints, index_type(n, dims, st), max(1, len(mshape))


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


# ----------------------------------------------------------------------------- outputs


def broadcast_shape(*operands: Any) -> tuple[int, ...]:
    """The broadcast shape of the tensor operands, with eager's error on a mismatch.
    (``torch.broadcast_shapes`` costs 7.5 µs a call through its symbolic-shape
    guards; this costs well under 1 for equal shapes: benchmarks/launch_profile.py.)"""
    shapes = [t.shape for t in operands if isinstance(t, torch.Tensor)]
    if not shapes:
        return ()
    first = shapes[0]
    if all(s == first for s in shapes):
        return tuple(first)
    nd = max(len(s) for s in shapes)
    out = [1] * nd
    for s in shapes:
        off = nd - len(s)
        for i, size in enumerate(s):
            have = out[off + i]
            if size != have and size != 1:
                if have != 1:
                    raise RuntimeError(
                        f"The size of tensor a ({have}) must match the size of tensor b "
                        f"({size}) at non-singleton dimension {off + i}"
                    )
                out[off + i] = size
    return tuple(out)


def _layout_source(shape: tuple[int, ...], operands: Sequence[Any]) -> torch.Tensor | None:
    """A full-shape, dense, non-contiguous operand whose layout eager's output keeps
    (channels-last activations): the output is allocated like it."""
    for t in operands:
        if (
            isinstance(t, torch.Tensor)
            and tuple(t.shape) == shape
            and not t.is_contiguous()
            and t.dim() in (4, 5)
            and t.is_contiguous(
                memory_format=torch.channels_last if t.dim() == 4 else torch.channels_last_3d
            )
        ):
            return t
    return None


def destination(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    operands: Sequence[Any],
    *,
    out: torch.Tensor | None = None,
    inplace: torch.Tensor | None = None,
    device: torch.device | None = None,
) -> torch.Tensor:
    """The tensor a result of ``shape``/``dtype`` goes into, with ATen's rules for
    in-place (``self`` must have the shape, the result must cast to its dtype) and
    ``out=`` (same device, castable, resized when its shape differs)."""
    if inplace is not None:
        if tuple(inplace.shape) != shape:
            raise RuntimeError(
                f"output with shape {list(inplace.shape)} doesn't match the broadcast shape "
                f"{list(shape)}"
            )
        if not torch.can_cast(dtype, inplace.dtype):
            raise RuntimeError(
                f"result type {dtype_name(dtype)} can't be cast to the desired output type "
                f"{dtype_name(inplace.dtype)}"
            )
        return inplace
    if device is None:
        device = _device_of(operands)
    if out is not None:
        if out.device != device:
            raise RuntimeError(
                f"Expected out tensor to have device {device}, but got {out.device} instead"
            )
        if not torch.can_cast(dtype, out.dtype):
            raise RuntimeError(
                f"result type {dtype_name(dtype)} can't be cast to the desired output type "
                f"{dtype_name(out.dtype)}"
            )
        if tuple(out.shape) != shape:
            if out.numel() != 0:
                import warnings

                warnings.warn(
                    f"An output with one or more elements was resized since it had shape "
                    f"{list(out.shape)}, which does not match the required output shape "
                    f"{list(shape)}. This behavior is deprecated, and in a future PyTorch "
                    "release outputs will not be resized unless they have zero elements. "
                    "You can explicitly reuse an out tensor t by resizing it, inplace, to "
                    "zero elements with t.resize_(0).",
                    UserWarning,
                    stacklevel=3,
                )
            out.resize_(shape)
        return out
    if len(shape) in (4, 5):
        like = _layout_source(shape, operands)
        if like is not None:
            return torch.empty_like(like, dtype=dtype)
    return torch.empty(shape, dtype=dtype, device=device)


def _device_of(operands: Sequence[Any]) -> torch.device:
    """The device of the first tensor with dimensions (a 0-dim CPU tensor may sit beside
    CUDA tensors), else of the first tensor."""
    first = None
    for t in operands:
        if isinstance(t, torch.Tensor):
            if t.dim() > 0:
                return t.device
            if first is None:
                first = t.device
    assert first is not None, "no tensor operand"
    return first


_NAMES = {
    torch.float16: "Half", torch.bfloat16: "BFloat16", torch.float32: "Float",
    torch.float64: "Double", torch.int8: "Char", torch.int16: "Short", torch.int32: "Int",
    torch.int64: "Long", torch.uint8: "Byte", torch.bool: "Bool",
}  # fmt: skip


def dtype_name(dtype: torch.dtype) -> str:
    return _NAMES.get(dtype, str(dtype))


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
    new tensor, ``out`` or ``inplace``; returns that tensor."""
    first = operands[0]
    if (
        out is None
        and inplace is None
        and type(first) is torch.Tensor
        and first.dim() > 0
        and first.is_contiguous()
        and all(type(t) is not torch.Tensor or t.shape == first.shape for t in operands)
    ):
        # same-shape operands, a new contiguous result: no broadcast or layout rules
        dest = torch.empty(first.shape, dtype=dtype, device=first.device)
    else:
        shape = broadcast_shape(*operands)
        dest = destination(shape, dtype, operands, out=out, inplace=inplace)
    return run(fn, operands, dest, compute_type(compute_dtype or dtype), p0, p1)


# ----------------------------------------------------------------------------- for op modules
# ATen entry points pass ``out``/``inplace`` to select the variant: a new tensor, ``self``
# (``<op>_``) or ``out`` (``<op>.out``).


def check_number(x: Any) -> None:
    if isinstance(x, complex):
        raise NotImplementedError("complex scalars have no Triton kernel here")


def require_float(op: str, *tensors: torch.Tensor) -> None:
    """Decline, as eager words it, an op defined for floating types only."""
    for t in tensors:
        if not t.dtype.is_floating_point:
            raise NotImplementedError(f"\"{op}\" not implemented for '{dtype_name(t.dtype)}'")


def unary(fn: Any, self: torch.Tensor, out: Any, inplace: Any, *, op: str | None = None,
          floats_only: bool = True, p0: float = 0.0, p1: float = 0.0) -> torch.Tensor:  # fmt: skip
    """A one-input op keeping ``self``'s dtype; declined (as eager words it) for bools, and
    for integers when the op is defined on floating types only."""
    name = op or fn.__name__.strip("_")
    if floats_only:
        require_float(name, self)
    elif self.dtype == torch.bool:
        raise NotImplementedError(f"\"{name}\" not implemented for 'Bool'")
    return elementwise(fn, [self], self.dtype, out=out, inplace=inplace, p0=p0, p1=p1)


def backward_op(fn: Any, grad: torch.Tensor, other: torch.Tensor, out: Any,
              p0: float = 0.0, p1: float = 0.0) -> torch.Tensor:  # fmt: skip
    if not torch.result_type(grad, other).is_floating_point:
        raise NotImplementedError(f"{fn.__name__.strip('_')} on integer tensors")
    return elementwise(fn, [grad, other], torch.result_type(grad, other), p0=p0, p1=p1, out=out)


#: the identity, for the copies of :mod:`opbench.kernels._lib.copy`
IDENTITY = _identity
