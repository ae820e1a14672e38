"""The argument rules of ATen's ``sum``, ``mean`` and ``amax``, as eager applies them: the
dim list (:func:`normalize_dims`: wrapped, range-checked, no repeats), the kept shape
(:func:`reduced_shape`), the result and accumulate dtypes (:func:`acc_dtype`) with
eager's errors, and the result tensor (``out=`` checks and allocation through
:func:`~opbench.kernels._lib.pointwise_rules.destination`): :func:`sum_args`,
:func:`mean_args`, :func:`amax_args`.

Kept apart from :mod:`opbench.kernels._lib.reduction`, which imports them, because they
are no part of a launch: that module plans and launches the kernel (its tiles, splits,
tuning constants and plan caches, and the entry points that call these rules on a first
call; a repeat call skips them), :mod:`reduction_kernels` holds the device code. This
module imports torch and the output rules alone: no kernels, no Triton.
"""

from __future__ import annotations

from typing import Any

import torch

from opbench.kernels._lib.pointwise_rules import destination, dtype_name

__all__ = [
    "acc_dtype",
    "normalize_dims",
    "reduced_shape",
    "sum_args",
    "mean_args",
    "amax_args",
]


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """Eager's accumulate type for a result of ``dtype``."""
    if dtype == torch.float64:
        return torch.float64
    if dtype.is_floating_point:
        if dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise NotImplementedError(f"no Triton kernel for {dtype}")
        return torch.float32
    if dtype.is_complex:
        raise NotImplementedError(f"no Triton kernel for {dtype}")
    return torch.int64


def normalize_dims(x: torch.Tensor, dim: Any, name: str = "") -> list[int]:
    """ATen's dim list: None or [] is every dim; wrapped, range-checked, no repeats."""
    nd = x.dim()
    if dim is None:
        return list(range(nd))
    if isinstance(dim, int):
        dim = [dim]
    dims = [int(d) for d in dim]
    if not dims:
        return list(range(nd))
    bound = max(nd, 1)
    out: list[int] = []
    for d in dims:
        if not -bound <= d < bound:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-bound}, {bound - 1}], "
                f"but got {d})"
            )
        w = d % bound
        if w in out:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        out.append(w)
    return [d for d in out if d < nd]


def reduced_shape(x: torch.Tensor, dims: list[int], keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(x.shape))
    return tuple(s for i, s in enumerate(x.shape) if i not in dims)


def _sum_result(
    x: torch.Tensor, dims: list[int], keepdim: bool, dtype: torch.dtype, out: Any
) -> tuple[list[int], torch.Tensor, torch.dtype | None]:
    """``(dims, result tensor, cast or None)`` of a sum or mean into ``dtype``: eager's
    ``out=`` dtype check, then the dtypes the kernel takes, then the result."""
    if out is not None and out.dtype != dtype:
        raise RuntimeError(
            f"Expected out tensor to have dtype {dtype}, but got {out.dtype} instead"
        )
    acc_dtype(dtype)
    acc_dtype(x.dtype)
    dest = destination(reduced_shape(x, dims, keepdim), dtype, [x], out=out)
    return dims, dest, (dtype if dtype != x.dtype else None)


def sum_args(
    x: torch.Tensor, dim: Any, keepdim: bool, dtype: torch.dtype | None, out: Any
) -> tuple[list[int], torch.Tensor, torch.dtype | None]:
    """``sum``'s ``(dims, result tensor, cast of each element or None)``: the result
    dtype is ``dtype``, else ``out``'s, else the input's (int64 for integers and bools)."""
    dims = normalize_dims(x, dim)
    if dtype is None:
        if out is not None:
            dtype = out.dtype
        elif x.dtype.is_floating_point or x.dtype.is_complex:
            dtype = x.dtype
        else:
            dtype = torch.int64
    return _sum_result(x, dims, keepdim, dtype, out)


def mean_args(
    x: torch.Tensor, dim: Any, keepdim: bool, dtype: torch.dtype | None, out: Any
) -> tuple[list[int], torch.Tensor, torch.dtype | None]:
    """``mean``'s ``(dims, result tensor, cast or None)``: floating dtypes only."""
    dims = normalize_dims(x, dim)
    if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(
            "mean(): could not infer output dtype. Optional dtype must be either a floating "
            f"point or complex dtype. Got: {dtype_name(dtype)}"
        )
    in_dtype = dtype or x.dtype
    if not (in_dtype.is_floating_point or in_dtype.is_complex):
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating "
            f"point or complex dtype. Got: {dtype_name(in_dtype)}"
        )
    out_dtype = dtype or (out.dtype if out is not None else x.dtype)
    return _sum_result(x, dims, keepdim, out_dtype, out)


def amax_args(x: torch.Tensor, dim: Any, keepdim: bool, out: Any) -> tuple[list[int], torch.Tensor]:
    """``amax``'s ``(dims, result tensor)``: the input's dtype, every reduced dim non-empty."""
    dims = normalize_dims(x, dim)
    if x.numel() == 0:
        if dim is None or (not isinstance(dim, int) and len(dim) == 0):
            raise RuntimeError(
                "amax(): Expected reduction dim to be specified for input.numel() == 0. "
                "Specify the reduction dim with the 'dim' argument."
            )
        for d in dims:
            if x.shape[d] == 0:
                raise IndexError(f"amax(): Expected reduction dim {d} to have non-zero size.")
    if out is not None and out.dtype != x.dtype:
        raise RuntimeError(
            f"Expected the dtype for input and out to match, but got {dtype_name(x.dtype)} for "
            f"input's dtype and {dtype_name(out.dtype)} for out's dtype."
        )
    acc_dtype(x.dtype)
    return dims, destination(reduced_shape(x, dims, keepdim), x.dtype, [x], out=out)
