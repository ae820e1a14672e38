"""How the elementwise engine's operands lie in memory, for :mod:`~opbench.kernels._lib.pointwise`'s
plans: broadcast strides, dimensions merged where every operand is contiguous across them,
the order a result lies in, and whether 32-bit indices reach every element. Pure
functions of shapes and strides (no tunable constants, no launches), so the planner
above them stays about what to launch; :mod:`~opbench.kernels._lib.copy` merges its
dimensions with them too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import triton.language as tl

__all__ = ["I32_SAFE", "dense_channels_last", "expanded_strides", "index_type", "memory_order",
           "merge_dims"]  # fmt: skip

#: Largest element count (and offset) indexed in int32: the last program's indices run
#: up to a block past the end before the mask.
I32_SAFE = 2**31 - 1 - 16384


def index_type(n: int, dims: Sequence[int], strides: Sequence[Sequence[int]]) -> Any:
    """``tl.int32`` when ``n`` and every operand's largest offset over ``dims`` fit in it
    (int32 index arithmetic: 0.96-0.99 of copy bandwidth for a 256 MiB add on the H100
    against 0.92 in int64, benchmarks/reproduce/launch_profile.py --sweep), else ``tl.int64``."""
    if n > I32_SAFE:
        return tl.int64
    for st in strides:
        if sum((d - 1) * abs(s) for d, s in zip(dims, st)) > I32_SAFE:
            return tl.int64
    return tl.int32


def merge_dims(shape: Sequence[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
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


def expanded_strides(t: torch.Tensor, shape: Sequence[int]) -> list[int]:
    """``t``'s strides when broadcast to ``shape`` (0 where broadcast)."""
    nd = len(shape)
    pad = nd - t.dim()
    out = [0] * nd
    for i in range(t.dim()):
        out[pad + i] = 0 if t.shape[i] == 1 and shape[pad + i] != 1 else t.stride(i)
    return out


def memory_order(out_strides: Sequence[int]) -> list[int]:
    """``out``'s dimensions outermost first as they lie in its memory (largest stride
    first; a stable sort, so a contiguous result keeps its order). Why: the strided kernel
    walks its flat index with the last dimension fastest, so in logical order a
    channels-last result (strides ``(HWC, 1, WC, C)``) was written and read ``C`` elements
    apart, one sector a lane: ``[32, 512, 14, 14]`` channels-last + a ``[512, 1, 1]`` bias
    took 60 us against eager's 12.7 (H200, 2026-12-02, every-row held-out part 1 of 16).
    In memory order its dimensions merge to two, ``[N*H*W, C]``, contiguous along ``C``,
    as PyTorch's TensorIterator orders them."""
    return sorted(range(len(out_strides)), key=lambda i: -out_strides[i])


def dense_channels_last(t: torch.Tensor) -> bool:
    """``t`` a 4-D or 5-D tensor dense in the channels-last order (its memory holds
    exactly its elements, from its first address)."""
    if t.dim() == 4:
        return t.is_contiguous(memory_format=torch.channels_last)
    return t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d)
