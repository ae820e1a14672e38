"""Data movement: ``copy_``, ``clone`` and ``cat``, on the pointwise family's kernels.

A copy is the identity function through :func:`opbench.kernels._lib.pointwise.run`:
contiguous operands take the flat kernel, anything else (broadcast source, transposed
or sliced tensors, the narrow slice of ``cat``'s output each input goes to) the strided
one, with the dtype conversion done on load and store. For these ops PyTorch's own
copies would be the op's work, so none is called here: only allocation and views.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import triton.language as tl

from opbench.kernels._lib import pointwise

__all__ = ["cat", "cat_out", "clone", "clone_out", "copy_"]


def _compute_type(dest: torch.dtype, src: torch.dtype) -> Any:
    if dest.is_complex or src.is_complex:
        raise NotImplementedError("complex copies have no Triton kernel here")
    if dest.is_floating_point or src.is_floating_point:
        return tl.float64 if torch.float64 in (dest, src) else tl.float32
    return tl.int64


def copy_into(dest: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """``dest[...] = src`` with broadcasting and dtype conversion; returns ``dest``."""
    return pointwise.run(pointwise.IDENTITY, [src], dest, _compute_type(dest.dtype, src.dtype))


def copy_(self: torch.Tensor, src: Any, non_blocking: bool = False) -> torch.Tensor:
    if not isinstance(src, torch.Tensor):
        raise NotImplementedError("copy_ from a Python number")
    if src.device != self.device:
        raise NotImplementedError(f"copy_ between devices ({src.device} -> {self.device})")
    torch.broadcast_shapes(tuple(src.shape), tuple(self.shape))  # eager's error on mismatch
    if pointwise.broadcast_shape(self, src) != tuple(self.shape):
        raise RuntimeError(
            f"output with shape {list(self.shape)} doesn't match the broadcast shape "
            f"{list(pointwise.broadcast_shape(self, src))}"
        )
    if self.numel() > 1 and _overlaps_itself(self):
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
    if fmt == torch.preserve_format and not _dense(self):
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


def _cat_into(dest: torch.Tensor, parts: Sequence[torch.Tensor], dim: int) -> torch.Tensor:
    offset = 0
    for t in parts:
        size = t.shape[dim]
        if size:
            copy_into(dest.narrow(dim, offset, size), t)
        offset += size
    return dest


def cat(tensors: Sequence[torch.Tensor], dim: int = 0) -> torch.Tensor:
    parts, d, shape = _cat_shape(tensors, dim)
    dtype = _cat_dtype(tensors)
    device = tensors[0].device
    if not parts:
        return torch.empty(shape, dtype=dtype, device=device)
    channels_last = all(
        t.dim() == 4
        and not t.is_contiguous()
        and t.is_contiguous(memory_format=torch.channels_last)
        for t in parts
    )
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    dest = torch.empty(shape, dtype=dtype, device=device, memory_format=fmt)
    return _cat_into(dest, parts, d)


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
