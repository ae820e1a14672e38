"""The output and dtype rules of ATen's elementwise-style ops, as eager applies them: the
broadcast shape and its error (:func:`broadcast_shape`), the tensor a result goes into,
with the in-place and ``out=`` checks, resizing and channels-last layout
(:func:`destination`), the result dtype of two operands (:func:`result_type`), eager's
dtype names in error messages (:func:`dtype_name`), and the checks that decline scalars
and dtypes the kernels do not take.

Kept apart from the elementwise engine (:mod:`~opbench.kernels._lib.pointwise`, which
imports them) because op families that never launch its kernels follow the same rules:
reductions, softmax and ``cat`` allocate their results through :func:`destination`.
This module imports torch alone: no kernels, no Triton.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = [
    "FLOATS",
    "broadcast_shape",
    "check_number",
    "destination",
    "dtype_name",
    "layout_source",
    "require_float",
    "result_type",
]

#: The floating dtypes the kernels take (float8 has none:
#: :func:`~opbench.kernels._lib.pointwise.compute_type`).
FLOATS = frozenset((torch.float16, torch.bfloat16, torch.float32, torch.float64))
_INTEGERS = frozenset((torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64))
_BOOL = torch.bool


def broadcast_shape(*operands: Any) -> tuple[int, ...]:
    """The broadcast shape of the tensor operands, with eager's error on a mismatch.
    (``torch.broadcast_shapes`` costs 7.5 µs a call through its symbolic-shape
    guards; this costs well under 1 for equal shapes: benchmarks/reproduce/launch_profile.py.)"""
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


def layout_source(shape: tuple[int, ...], operands: Sequence[Any]) -> torch.Tensor | None:
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
        like = layout_source(shape, operands)
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


def result_type(self: Any, other: Any) -> torch.dtype:
    """``torch.result_type(self, other)``, answered in Python where the rule is plain: two
    tensors of one dtype, or a tensor and a Python number of no higher category (the
    number takes the tensor's dtype). ``torch.result_type`` costs 0.74 µs with a Python
    float (it wraps the number in a tensor) and 0.28 with two tensors; these checks cost
    about 0.1 (CPU, timeit)."""
    if type(self) is torch.Tensor:
        d = self.dtype
        t = type(other)
        if t is torch.Tensor:
            if other.dtype == d:
                return d
        elif t is float:
            if d in FLOATS:
                return d
        elif t is int:
            if d in FLOATS or d in _INTEGERS:
                return d
        elif t is bool:
            if d in FLOATS or d in _INTEGERS or d is _BOOL:
                return d
    return torch.result_type(self, other)


def check_number(x: Any) -> None:
    if isinstance(x, complex):
        raise NotImplementedError("complex scalars have no Triton kernel here")


def require_float(op: str, *tensors: torch.Tensor) -> None:
    """Decline, as eager words it, an op defined for floating types only."""
    for t in tensors:
        if not t.dtype.is_floating_point:
            raise NotImplementedError(f"\"{op}\" not implemented for '{dtype_name(t.dtype)}'")
