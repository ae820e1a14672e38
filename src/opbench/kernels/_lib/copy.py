"""Data movement: ``copy_``, ``clone`` and ``cat``, on the pointwise family's kernels.

A copy is the identity function through :func:`opbench.kernels._lib.pointwise.run`:
contiguous operands take the flat kernel, anything else (broadcast source, transposed
or sliced tensors) the strided one, with the dtype conversion done on load and store.

``cat`` copies up to :data:`CAT_PARTS_WIDE` inputs in one launch (:func:`_cat_kernel`
for up to four, :func:`_cat8_kernel` for five to eight: grid axis 1 picks the input,
each with its own merged shape and strides, transposed views included), as eager's
batched cat does: one launch per input cost 0.64x eager's device
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
from opbench.kernels._lib.native_launch import declare_flat, declare_replay
from opbench.kernels._lib.pointwise_kernels import unravel
from opbench.kernels._lib.pointwise_layout import I32_SAFE, index_type, merge_dims
from opbench.kernels._lib.pointwise_rules import broadcast_shape, destination

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
        shape = broadcast_shape(self, src)  # eager's error on a mismatch
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


@triton.jit
def _source(a, b, c, p0, p1):
    """copy_'s kernel on the C++ gate, which launches self as ``a`` and the source as
    ``b``: the result is ``b`` (self's load is dead code, and Triton drops it: the sm_90
    code loads one stream, as the Python path's identity of the source does)."""
    return b


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
    dest = destination(tuple(self.shape), self.dtype, [self], out=out)
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


#: Inputs one cat launch copies (grid axis 1): up to CAT_PARTS through
#: :func:`_cat_kernel`, up to CAT_PARTS_WIDE through :func:`_cat8_kernel`; more take
#: further launches.
CAT_PARTS = 4
CAT_PARTS_WIDE = 8


@triton.jit
def _cat_part(src_ptr, out_ptr, idx, n, d1, d2, d3, s0, s1, s2, s3, o0, o1, o2, o3, base,
              IDX: tl.constexpr, NDIM: tl.constexpr, VEC: tl.constexpr,
              UNIT: tl.constexpr):  # fmt: skip
    """Copy element ``idx`` of one input (merged shape (d0, d1, d2, d3), strides ``s``)
    to the output (strides ``o`` from element ``base``), converting on store.

    ``UNIT``: the innermost dim has stride 1 in the input and the output (``s3``/``o3``
    are not read). ``n``, ``d3``, ``base`` and the outer strides then arrive divided by
    VEC and are multiplied back here, so the compiler sees runs of VEC contiguous,
    aligned elements and moves them as one vector (the traced cats of attention-head
    views are 64-element rows: each f16 element was loaded and stored alone)."""
    n = n.to(IDX) * VEC
    d3 = d3.to(IDX) * VEC
    mask = idx < n
    i0, i1, i2, i3 = unravel(idx, d1, d2, d3, IDX, NDIM)
    src_off = i0 * (s0.to(IDX) * VEC) + i1 * (s1.to(IDX) * VEC) + i2 * (s2.to(IDX) * VEC)
    out_off = i0 * (o0.to(IDX) * VEC) + i1 * (o1.to(IDX) * VEC) + i2 * (o2.to(IDX) * VEC)
    if UNIT:
        src_off += i3
        out_off += i3
    else:
        src_off += i3 * s3.to(IDX)
        out_off += i3 * o3.to(IDX)
    v = tl.load(src_ptr + src_off, mask=mask)
    tl.store(out_ptr + (base.to(IDX) * VEC + out_off), v.to(out_ptr.dtype.element_ty), mask=mask)


# Like copy._cat8_kernel, kept apart: at most 4 inputs, 52 integers a launch, not 104
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
    VEC: tl.constexpr, UNIT: tl.constexpr,
):  # fmt: skip
    """Up to four inputs of a cat, one per program row (axis 1). Input ``j``'s thirteen
    integers ``g[13j:13j+13]``: elements, d1-d3, its strides, the output's strides over
    its merged dims, and where its slice of the output starts."""
    j = tl.program_id(1)
    idx = tl.program_id(0).to(IDX) * BLOCK + tl.arange(0, BLOCK)
    if j == 0:
        _cat_part(p0_ptr, out_ptr, idx, g0, g1, g2, g3, g4, g5, g6, g7, g8, g9, g10, g11, g12, IDX, NDIM, VEC, UNIT)  # fmt: skip
    if PARTS > 1:
        if j == 1:
            _cat_part(p1_ptr, out_ptr, idx, g13, g14, g15, g16, g17, g18, g19, g20, g21, g22, g23, g24, g25, IDX, NDIM, VEC, UNIT)  # fmt: skip
    if PARTS > 2:
        if j == 2:
            _cat_part(p2_ptr, out_ptr, idx, g26, g27, g28, g29, g30, g31, g32, g33, g34, g35, g36, g37, g38, IDX, NDIM, VEC, UNIT)  # fmt: skip
    if PARTS > 3:
        if j == 3:
            _cat_part(p3_ptr, out_ptr, idx, g39, g40, g41, g42, g43, g44, g45, g46, g47, g48, g49, g50, g51, IDX, NDIM, VEC, UNIT)  # fmt: skip


# Like copy._cat_kernel, kept apart: 5-8 inputs, so 2-4-input cats pass no unused ints
@triton.jit(do_not_specialize=[f"g{i}" for i in range(13 * 8)])
def _cat8_kernel(
    out_ptr, p0_ptr, p1_ptr, p2_ptr, p3_ptr, p4_ptr, p5_ptr, p6_ptr, p7_ptr,
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
    g50: tl.int64, g51: tl.int64, g52: tl.int64, g53: tl.int64, g54: tl.int64,
    g55: tl.int64, g56: tl.int64, g57: tl.int64, g58: tl.int64, g59: tl.int64,
    g60: tl.int64, g61: tl.int64, g62: tl.int64, g63: tl.int64, g64: tl.int64,
    g65: tl.int64, g66: tl.int64, g67: tl.int64, g68: tl.int64, g69: tl.int64,
    g70: tl.int64, g71: tl.int64, g72: tl.int64, g73: tl.int64, g74: tl.int64,
    g75: tl.int64, g76: tl.int64, g77: tl.int64, g78: tl.int64, g79: tl.int64,
    g80: tl.int64, g81: tl.int64, g82: tl.int64, g83: tl.int64, g84: tl.int64,
    g85: tl.int64, g86: tl.int64, g87: tl.int64, g88: tl.int64, g89: tl.int64,
    g90: tl.int64, g91: tl.int64, g92: tl.int64, g93: tl.int64, g94: tl.int64,
    g95: tl.int64, g96: tl.int64, g97: tl.int64, g98: tl.int64, g99: tl.int64,
    g100: tl.int64, g101: tl.int64, g102: tl.int64, g103: tl.int64,
    PARTS: tl.constexpr, BLOCK: tl.constexpr, IDX: tl.constexpr, NDIM: tl.constexpr,
    VEC: tl.constexpr, UNIT: tl.constexpr,
):  # fmt: skip
    """:func:`_cat_kernel` for five to eight inputs (one launch for the traced cats of five
    attention-head views, which took two); a kernel of its own so that the common cats of
    two to four inputs do not pass 52 unused integers a launch."""
    j = tl.program_id(1)
    idx = tl.program_id(0).to(IDX) * BLOCK + tl.arange(0, BLOCK)
    if j == 0:
        _cat_part(p0_ptr, out_ptr, idx, g0, g1, g2, g3, g4, g5, g6, g7, g8, g9, g10, g11, g12, IDX, NDIM, VEC, UNIT)  # fmt: skip
    if j == 1:
        _cat_part(p1_ptr, out_ptr, idx, g13, g14, g15, g16, g17, g18, g19, g20, g21, g22, g23, g24, g25, IDX, NDIM, VEC, UNIT)  # fmt: skip
    if j == 2:
        _cat_part(p2_ptr, out_ptr, idx, g26, g27, g28, g29, g30, g31, g32, g33, g34, g35, g36, g37, g38, IDX, NDIM, VEC, UNIT)  # fmt: skip
    if j == 3:
        _cat_part(p3_ptr, out_ptr, idx, g39, g40, g41, g42, g43, g44, g45, g46, g47, g48, g49, g50, g51, IDX, NDIM, VEC, UNIT)  # fmt: skip
    if j == 4:
        _cat_part(p4_ptr, out_ptr, idx, g52, g53, g54, g55, g56, g57, g58, g59, g60, g61, g62, g63, g64, IDX, NDIM, VEC, UNIT)  # fmt: skip
    if PARTS > 5:
        if j == 5:
            _cat_part(p5_ptr, out_ptr, idx, g65, g66, g67, g68, g69, g70, g71, g72, g73, g74, g75, g76, g77, IDX, NDIM, VEC, UNIT)  # fmt: skip
    if PARTS > 6:
        if j == 6:
            _cat_part(p6_ptr, out_ptr, idx, g78, g79, g80, g81, g82, g83, g84, g85, g86, g87, g88, g89, g90, IDX, NDIM, VEC, UNIT)  # fmt: skip
    if PARTS > 7:
        if j == 7:
            _cat_part(p7_ptr, out_ptr, idx, g91, g92, g93, g94, g95, g96, g97, g98, g99, g100, g101, g102, g103, IDX, NDIM, VEC, UNIT)  # fmt: skip


_cat = Launcher(_cat_kernel)
_cat8 = Launcher(_cat8_kernel)

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
        mshape, (src_st, out_st) = merge_dims(tuple(t.shape), [list(t.stride()), out_stride])
        if len(mshape) > pointwise.MAX_DIMS:
            return None
        pad = pointwise.MAX_DIMS - len(mshape)
        dims = [1] * pad + mshape
        items.append((i, n, dims, [0] * pad + src_st, [0] * pad + out_st, base, len(mshape)))
    per = CAT_PARTS if len(items) <= CAT_PARTS else CAT_PARTS_WIDE
    cap = 16 // min(dest.element_size(), *(t.element_size() for t in parts))
    for k in range(0, len(items), per):
        chunk = items[k : k + per]
        slots = CAT_PARTS if len(chunk) <= CAT_PARTS else CAT_PARTS_WIDE
        ints: list[int] = []
        wide = False
        ndim = max(c[6] for c in chunk)
        unit = all(c[3][3] == 1 and c[4][3] == 1 for c in chunk)
        vec = _cat_vec(chunk, cap) if unit else 1
        for _, n, dims, src_st, out_st, base, _rank in chunk:
            # divided by vec: see _cat_part (d1, d2 and the unit strides as they are)
            ints += [n // vec, dims[1], dims[2], dims[3] // vec,
                     *(st // vec for st in src_st[:3]), src_st[3],
                     *(st // vec for st in out_st[:3]), out_st[3], base // vec]  # fmt: skip
            last = base + sum((d - 1) * abs(o) for d, o in zip(dims, out_st))
            if index_type(n, dims, [src_st]) is tl.int64 or last > I32_SAFE:
                wide = True
        ints += [0] * (13 * slots - len(ints))
        grid = (cdiv(max(c[1] for c in chunk), block), len(chunk))
        consts = dict(PARTS=len(chunk), BLOCK=block, IDX=tl.int64 if wide else tl.int32,
                      NDIM=ndim, VEC=vec, UNIT=unit)  # fmt: skip
        launches.append((tuple(c[0] for c in chunk), grid, tuple(ints), consts))
    return launches


def _cat_vec(chunk: Sequence[tuple], cap: int) -> int:
    """The largest of 8, 4, 2 (at most ``cap``) dividing every input's element count,
    innermost size, base and outer strides in ``chunk``, else 1."""
    values = [v for _, n, dims, src, out, base, _ in chunk
              for v in (n, dims[3], base, *src[:3], *out[:3])]  # fmt: skip
    for v in (8, 4, 2):
        if v <= cap and all(u % v == 0 for u in values):
            return v
    return 1


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
        if len(ptrs) <= CAT_PARTS:
            ptrs += [dest] * (CAT_PARTS - len(ptrs))
            _cat(grid, (dest, *ptrs, *ints), **consts)
        else:
            ptrs += [dest] * (CAT_PARTS_WIDE - len(ptrs))
            _cat8(grid, (dest, *ptrs, *ints), **consts)
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
    dest = destination(tuple(shape), dtype, list(parts) or [out], out=out)
    return _cat_into(dest, parts, d)


# The C++ gate launches a contiguous clone without entering Python (native_launch): the
# flat kernel with the identity, only where no memory_format is given (its output is
# contiguous, as preserve_format makes it for a contiguous input).
# clone keeps a strided input's layout (preserve_format), which the strided launch does not
declare_flat(clone, ("clone.default",), (pointwise.IDENTITY,), 1, none_args=(1,), integers=True,
             strided=False)  # fmt: skip
# copy_ from a tensor on self's device of self's dtype or a narrower one of its kind (the
# compute type is then self's, as copy_into's _compute_type picks it); a copy between
# devices, or one that narrows, goes to Python
declare_flat(copy_, ("copy_.default",), (_source,), 2, inplace=True, integers=True,
             other="source")  # fmt: skip

# the gate repeats these functions' launches (native_launch.declare_replay)
declare_replay(
    cat,
    cat_out,
    clone,
    clone_out,
    copy_,
)
