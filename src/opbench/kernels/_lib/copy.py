"""Data movement: ``copy_``, ``clone`` and ``cat``, on the pointwise family's kernels.

A copy is the identity function through :func:`opbench.kernels._lib.pointwise.run`:
contiguous operands take the flat kernel, anything else (broadcast source, transposed
or sliced tensors) the strided one, with the dtype conversion done on load and store.

``cat`` copies up to :data:`CAT_PARTS` inputs in one launch (:func:`_cat_kernel`: grid
axis 1 picks the input, each with its own merged shape and strides, transposed views
included), as eager's batched cat does: one launch per input cost 0.64x eager's device
time and five times its host time on the traced cases (five inputs a call are common).
The launch plan (merged dims, strides, offsets) is cached per input layout, so a model
calling the same cat again pays a dictionary lookup, not the planning.
For these ops PyTorch's own copies would be the op's work, so none is called here:
only allocation and views.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib import pointwise
from opbench.kernels._lib.launch import Launcher, cdiv, remember

__all__ = ["cat", "cat_out", "clone", "clone_out", "copy_"]


def _compute_type(dest: torch.dtype, src: torch.dtype) -> Any:
    hit = _COPY_COMPUTE.get((dest, src))
    if hit is not None:
        return hit
    if dest.is_complex or src.is_complex:
        raise NotImplementedError("complex copies have no Triton kernel here")
    if dest.is_floating_point or src.is_floating_point:
        return tl.float64 if torch.float64 in (dest, src) else tl.float32
    return tl.int64


_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
#: (dest, src) dtype -> compute type for the float pairs: the dtype checks above cost
#: 0.4 µs a copy
_COPY_COMPUTE = {
    (d, s): tl.float64 if torch.float64 in (d, s) else tl.float32 for d in _FLOATS for s in _FLOATS
}


def copy_into(dest: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """``dest[...] = src`` with broadcasting and dtype conversion; returns ``dest``."""
    return pointwise.run(pointwise.IDENTITY, [src], dest, _compute_type(dest.dtype, src.dtype))


def copy_(self: torch.Tensor, src: Any, non_blocking: bool = False) -> torch.Tensor:
    if not isinstance(src, torch.Tensor):
        raise NotImplementedError("copy_ from a Python number")
    if src.device != self.device:
        raise NotImplementedError(f"copy_ between devices ({src.device} -> {self.device})")
    if src.shape != self.shape:
        shape = pointwise.broadcast_shape(self, src)  # eager's error on a mismatch
        if shape != tuple(self.shape):
            raise RuntimeError(
                f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                f"{list(shape)}"
            )
    if not self.is_contiguous() and self.numel() > 1 and _overlaps_itself(self):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers "
            "to a single memory location. Please clone() the tensor before performing the "
            "operation."
        )
    if (
        self.data_ptr() == src.data_ptr()
        and self.stride() == src.stride()
        and self.dtype == src.dtype
    ):
        return self  # copying a tensor onto itself
    return copy_into(self, src)


def _overlaps_itself(t: torch.Tensor) -> bool:
    """A stride-0 dimension of size > 1 (expanded tensor): writes would collide."""
    return any(st == 0 and sz > 1 for st, sz in zip(t.stride(), t.shape))


def _dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense: the strides are a permutation of a contiguous layout."""
    dims = sorted((st, sz) for st, sz in zip(t.stride(), t.shape) if sz != 1)
    expect = 1
    for st, sz in dims:
        if st != expect:
            return False
        expect *= sz
    return True


def _like(self: torch.Tensor, memory_format: torch.memory_format | None) -> torch.Tensor:
    fmt = torch.preserve_format if memory_format is None else memory_format
    if fmt == torch.preserve_format and not self.is_contiguous() and not _dense(self):
        # eager's preserve_format falls back to the suggested format of the strides
        fmt = torch.contiguous_format
        if self.dim() == 4 and _is_channels_last_like(self):
            fmt = torch.channels_last
    return torch.empty_like(self, memory_format=fmt)


def _is_channels_last_like(t: torch.Tensor) -> bool:
    n, c, h, w = t.stride()
    return c < w <= h <= n if t.shape[1] > 1 else False


def clone(self: torch.Tensor, *, memory_format: torch.memory_format | None = None) -> torch.Tensor:
    return copy_into(_like(self, memory_format), self)


def clone_out(
    self: torch.Tensor, *, memory_format: torch.memory_format | None = None, out: torch.Tensor
) -> torch.Tensor:
    dest = pointwise.destination(tuple(self.shape), self.dtype, [self], out=out)
    return copy_into(dest, self)


def _cat_dtype(tensors: Sequence[torch.Tensor]) -> torch.dtype:
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype


def _cat_shape(
    tensors: Sequence[torch.Tensor], dim: int
) -> tuple[list[torch.Tensor], int, list[int]]:
    """The inputs that take part (legacy 1-D empty tensors are skipped, as in eager),
    the wrapped dim and the output shape; eager's errors for the rest."""
    if len(tensors) == 0:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    parts = [t for t in tensors if not (t.dim() == 1 and t.numel() == 0)]
    if not parts:
        return [], 0, list(tensors[0].shape)
    ref = parts[0]
    if ref.dim() == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    nd = ref.dim()
    if not -nd <= dim < nd:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})"
        )
    dim %= nd
    shape = list(ref.shape)
    shape[dim] = 0
    for i, t in enumerate(parts):
        if t.dim() != nd:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {nd} and {t.dim()}"
            )
        for d in range(nd):
            if d != dim and t.shape[d] != ref.shape[d]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {dim}. Expected size "
                    f"{ref.shape[d]} but got size {t.shape[d]} for tensor number {i} in the list."
                )
        if t.device != ref.device:
            raise RuntimeError("Expected all tensors to be on the same device")
        shape[dim] += t.shape[dim]
    return parts, dim, shape


#: Inputs one cat launch copies (grid axis 1); more take further launches.
CAT_PARTS = 4


@triton.jit
def _cat_part(src_ptr, out_ptr, idx, n, d1, d2, d3, s0, s1, s2, s3, o0, o1, o2, o3, base,
              IDX: tl.constexpr, NDIM: tl.constexpr):  # fmt: skip
    """Copy element ``idx`` of one input (merged shape (d0, d1, d2, d3), strides ``s``)
    to the output (strides ``o`` from element ``base``), converting on store."""
    mask = idx < n.to(IDX)
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
    src_off = i0 * s0.to(IDX) + i1 * s1.to(IDX) + i2 * s2.to(IDX) + i3 * s3.to(IDX)
    out_off = i0 * o0.to(IDX) + i1 * o1.to(IDX) + i2 * o2.to(IDX) + i3 * o3.to(IDX)
    v = tl.load(src_ptr + src_off, mask=mask)
    tl.store(out_ptr + (base.to(IDX) + out_off), v.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=[f"g{i}" for i in range(4 * 13)])
def _cat_kernel(
    out_ptr, p0_ptr, p1_ptr, p2_ptr, p3_ptr,
    g0: tl.int64, g1: tl.int64, g2: tl.int64, g3: tl.int64, g4: tl.int64,
    g5: tl.int64, g6: tl.int64, g7: tl.int64, g8: tl.int64, g9: tl.int64,
    g10: tl.int64, g11: tl.int64, g12: tl.int64, g13: tl.int64, g14: tl.int64,
    g15: tl.int64, g16: tl.int64, g17: tl.int64, g18: tl.int64, g19: tl.int64,
    g20: tl.int64, g21: tl.int64, g22: tl.int64, g23: tl.int64, g24: tl.int64,
    g25: tl.int64, g26: tl.int64, g27: tl.int64, g28: tl.int64, g29: tl.int64,
    g30: tl.int64, g31: tl.int64, g32: tl.int64, g33: tl.int64, g34: tl.int64,
    g35: tl.int64, g36: tl.int64, g37: tl.int64, g38: tl.int64, g39: tl.int64,
    g40: tl.int64, g41: tl.int64, g42: tl.int64, g43: tl.int64, g44: tl.int64,
    g45: tl.int64, g46: tl.int64, g47: tl.int64, g48: tl.int64, g49: tl.int64,
    g50: tl.int64, g51: tl.int64,
    PARTS: tl.constexpr, BLOCK: tl.constexpr, IDX: tl.constexpr, NDIM: tl.constexpr,
):  # fmt: skip
    """Up to four inputs of a cat, one per program row (axis 1). Input ``j``'s thirteen
    integers ``g[13j:13j+13]``: elements, d1-d3, its strides, the output's strides over
    its merged dims, and where its slice of the output starts."""
    j = tl.program_id(1)
    idx = tl.program_id(0).to(IDX) * BLOCK + tl.arange(0, BLOCK)
    if j == 0:
        _cat_part(p0_ptr, out_ptr, idx, g0, g1, g2, g3, g4, g5, g6, g7, g8, g9, g10, g11, g12, IDX, NDIM)  # fmt: skip
    if PARTS > 1:
        if j == 1:
            _cat_part(p1_ptr, out_ptr, idx, g13, g14, g15, g16, g17, g18, g19, g20, g21, g22, g23, g24, g25, IDX, NDIM)  # fmt: skip
    if PARTS > 2:
        if j == 2:
            _cat_part(p2_ptr, out_ptr, idx, g26, g27, g28, g29, g30, g31, g32, g33, g34, g35, g36, g37, g38, IDX, NDIM)  # fmt: skip
    if PARTS > 3:
        if j == 3:
            _cat_part(p3_ptr, out_ptr, idx, g39, g40, g41, g42, g43, g44, g45, g46, g47, g48, g49, g50, g51, IDX, NDIM)  # fmt: skip


_cat = Launcher(_cat_kernel)

#: (dim, output layout, inputs' layouts) -> launches: (input positions, grid, integers,
#: constexprs); None where an input needs more than four merged dims (copied one by one).
_CAT_PLANS: dict[
    tuple, list[tuple[tuple[int, ...], tuple[int, int], tuple[int, ...], dict[str, Any]]] | None
] = {}  # noqa: E501


def _cat_plan(dest: torch.Tensor, parts: Sequence[torch.Tensor], dim: int) -> list[Any] | None:
    launches = []
    block = pointwise._BLOCK_NOW
    out_stride = list(dest.stride())
    items: list[tuple[int, int, list[int], list[int], list[int], int, int]] = []
    offset = 0
    for i, t in enumerate(parts):
        size = t.shape[dim]
        base = offset * out_stride[dim]
        offset += size
        n = t.numel()
        if n == 0:
            continue
        mshape, (src_st, out_st) = pointwise._merge_dims(
            tuple(t.shape), [list(t.stride()), out_stride]
        )
        if len(mshape) > pointwise.MAX_DIMS:
            return None
        pad = pointwise.MAX_DIMS - len(mshape)
        dims = [1] * pad + mshape
        items.append((i, n, dims, [0] * pad + src_st, [0] * pad + out_st, base, len(mshape)))
    for k in range(0, len(items), CAT_PARTS):
        chunk = items[k : k + CAT_PARTS]
        ints: list[int] = []
        wide = False
        ndim = 1
        for _, n, dims, src_st, out_st, base, rank in chunk:
            ints += [n, dims[1], dims[2], dims[3], *src_st, *out_st, base]
            ndim = max(ndim, rank)
            last = base + sum((d - 1) * abs(o) for d, o in zip(dims, out_st))
            if pointwise.index_type(n, dims, [src_st]) is tl.int64 or last > pointwise._I32_SAFE:
                wide = True
        ints += [0] * (13 * CAT_PARTS - len(ints))
        grid = (cdiv(max(c[1] for c in chunk), block), len(chunk))
        consts = dict(PARTS=len(chunk), BLOCK=block, IDX=tl.int64 if wide else tl.int32, NDIM=ndim)
        launches.append((tuple(c[0] for c in chunk), grid, tuple(ints), consts))
    return launches


def _cat_into(dest: torch.Tensor, parts: Sequence[torch.Tensor], dim: int) -> torch.Tensor:
    key = (
        dim,
        dest.stride(),
        dest.dtype,
        dest.device,
        *((t.shape, t.stride(), t.dtype) for t in parts),
    )
    plan = _CAT_PLANS.get(key, False)
    if plan is False:
        plan = remember(_CAT_PLANS, key, _cat_plan(dest, parts, dim))
    return _cat_launch(dest, parts, dim, plan)


def _cat_launch(
    dest: torch.Tensor, parts: Sequence[torch.Tensor], dim: int, plan: list[Any] | None
) -> torch.Tensor:
    if plan is None:
        offset = 0
        for t in parts:
            size = t.shape[dim]
            if size:
                copy_into(dest.narrow(dim, offset, size), t)
            offset += size
        return dest
    for positions, grid, ints, consts in plan:
        ptrs = [parts[i] for i in positions]
        ptrs += [dest] * (CAT_PARTS - len(ptrs))
        _cat(grid, (dest, *ptrs, *ints), **consts)
    return dest


#: (dim, each input's shape, strides, dtype and device) -> what :func:`cat` derives from
#: them: the output's shape, dtype, device and memory format, the inputs that take part,
#: the wrapped dim and the launch plan. A hit skips the shape checks, the promotion and
#: the plan's own key: 17.4 -> 7.2 µs for the traced cat of [1, 12, 64, 64] f16 views,
#: 20.1 -> 5.5 for four [64, 104, 14, 14] (host_profile.py --python-only, CPU).
_CAT_CALLS: dict[tuple, Any] = {}


def cat(tensors: Sequence[torch.Tensor], dim: int = 0) -> torch.Tensor:
    key: list[Any] = [dim]
    for t in tensors:
        key.append((t.shape, t.stride(), t.dtype, t.device))
    k = tuple(key)
    hit = _CAT_CALLS.get(k)
    if hit is None:
        hit = remember(_CAT_CALLS, k, _cat_call(tensors, dim))
    shape, dtype, device, fmt, keep, d, plan = hit
    dest = torch.empty(shape, dtype=dtype, device=device, memory_format=fmt)
    if not keep:
        return dest
    parts = tensors if len(keep) == len(tensors) else [tensors[i] for i in keep]
    return _cat_launch(dest, parts, d, plan)


def _cat_call(tensors: Sequence[torch.Tensor], dim: int) -> tuple[Any, ...]:
    """The cached part of :func:`cat` (eager's errors raised here, so never cached)."""
    parts, d, shape = _cat_shape(tensors, dim)
    dtype = _cat_dtype(tensors)
    device = tensors[0].device
    if not parts:
        return tuple(shape), dtype, device, torch.contiguous_format, (), d, []
    channels_last = all(
        t.dim() == 4
        and not t.is_contiguous()
        and t.is_contiguous(memory_format=torch.channels_last)
        for t in parts
    )
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    dest = torch.empty(shape, dtype=dtype, device=device, memory_format=fmt)
    keep = tuple(i for i, t in enumerate(tensors) if not (t.dim() == 1 and t.numel() == 0))
    return tuple(shape), dtype, device, fmt, keep, d, _cat_plan(dest, parts, d)


def cat_out(tensors: Sequence[torch.Tensor], dim: int = 0, *, out: torch.Tensor) -> torch.Tensor:
    parts, d, shape = _cat_shape(tensors, dim)
    dtype = _cat_dtype(tensors)
    for t in parts:
        if out.data_ptr() == t.data_ptr() and out.numel():
            raise RuntimeError(
                "unsupported operation: some elements of the input tensor and the written-to "
                "tensor refer to a single memory location."
            )
    dest = pointwise.destination(tuple(shape), dtype, list(parts) or [out], out=out)
    return _cat_into(dest, parts, d)
