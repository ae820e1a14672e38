"""The ATen entry points of the reductions (``sum``, ``mean``, ``amax`` and their
``out=`` overloads): each checks its arguments as eager does (:mod:`reduction_rules`) and
reduces through :func:`~opbench.kernels._lib.reduction.reduce_into`; a repeat call of
an entry point without ``out=`` skips the checks (:data:`_CALLS`).

Apart from :mod:`reduction`, the plan and the launch, because other kernels reduce
through that (the softmaxes, ``embedding``, the convolutions' bias gradient) without
these schemas. The kernel directories' ``sum``/``mean``/``amax`` folders import from here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from opbench.kernels._lib.launch import remember
from opbench.kernels._lib.native_launch import declare_replay
from opbench.kernels._lib.reduction import _NOTHING, MAX, SUM, _launch, _reduce_into, reduce_into
from opbench.kernels._lib.reduction_rules import amax_args, mean_args, sum_args

__all__ = [
    "amax",
    "amax_out",
    "mean_default",
    "mean_dim",
    "mean_dtype_out",
    "mean_out",
    "sum_default",
    "sum_dim",
    "sum_dim_out",
    "sum_out",
]

#: (entry point, input layout and dtype, its arguments as given) -> :func:`_call`'s
#: ``(output shape, strides, dtype, launch)``: a repeat call of ``sum``/``mean``/``amax``
#: without ``out=`` checks nothing again (the same arguments passed the checks before)
#: and only allocates and launches: 6.5-13.4 -> 2.8-5.3 us of Python a call on the 15
#: traced sum/mean cases (launches stubbed, CPU; ``benchmarks/reproduce/host_profile.py
#: --python-only --ops sum,mean``).
_CALLS: dict[tuple, Any] = {}


def _call(key: tuple, x: torch.Tensor) -> torch.Tensor | None:
    """A repeat call's result (allocated and launched), or None on a first call."""
    call = _CALLS.get(key)
    if call is None:
        return None
    shape, stride, dtype, launch = call
    out = torch.empty_strided(shape, stride, dtype=dtype, device=x.device)
    if launch is not None:
        _launch(x, out, launch)
    return out


def _first(key: tuple, x: torch.Tensor, dims: list[int], dest: torch.Tensor, op: int,
           mean: bool, cast: torch.dtype | None) -> torch.Tensor:  # fmt: skip
    """A first call's reduction into ``dest`` (allocated without ``out=``); remembers
    what a repeat call needs when ``x`` reads in place and ``dest`` is contiguous."""
    plan = _reduce_into(x, dims, dest, op, mean, cast)
    if plan is _NOTHING:
        remember(_CALLS, key, (tuple(dest.shape), dest.stride(), dest.dtype, None))
    elif plan[0] is None and dest.is_contiguous():
        remember(_CALLS, key, (tuple(dest.shape), dest.stride(), dest.dtype, plan[1]))
    return dest


def _dims_key(dim: Any) -> Any:
    return tuple(dim) if dim.__class__ is list else dim


# ----------------------------------------------------------------------------- ATen ops


def _sum_or_mean(kind: str, mean: bool) -> tuple[Callable[..., torch.Tensor], ...]:
    """``kind``'s four entry points (``sum`` or ``mean``; their schemas differ only in the
    name): ``.default`` and ``.dim`` (``.dim_IntList``), whose repeat calls go straight to
    :func:`_call`, and the two ``out=`` overloads, checked every time. Made here, not
    written twice: the closures cost a repeat call no more Python calls than a ``def``
    apiece would."""
    rules = mean_args if mean else sum_args

    def run(self: torch.Tensor, dim: Any, keepdim: bool, dtype: Any, out: Any,
            key: tuple | None = None) -> torch.Tensor:  # fmt: skip
        dims, dest, cast = rules(self, dim, keepdim, dtype, out)
        if key is not None:
            return _first(key, self, dims, dest, SUM, mean, cast)
        return reduce_into(self, dims, dest, SUM, mean=mean, cast=cast)

    def default(self: torch.Tensor, *, dtype: torch.dtype | None = None) -> torch.Tensor:
        key = (kind, self.shape, self.stride(), self.dtype, None, False, dtype)
        got = _call(key, self)
        return got if got is not None else run(self, None, False, dtype, None, key)

    def dim(
        self: torch.Tensor, dim: Any, keepdim: bool = False, *, dtype: torch.dtype | None = None
    ) -> torch.Tensor:
        key = (kind, self.shape, self.stride(), self.dtype, _dims_key(dim), keepdim, dtype)
        got = _call(key, self)
        return got if got is not None else run(self, dim, keepdim, dtype, None, key)

    def dim_out(
        self: torch.Tensor,
        dim: Any,
        keepdim: bool = False,
        *,
        dtype: torch.dtype | None = None,
        out: torch.Tensor,
    ) -> torch.Tensor:
        return run(self, dim, keepdim, dtype, out)

    def whole_out(
        self: torch.Tensor, *, dtype: torch.dtype | None = None, out: torch.Tensor
    ) -> torch.Tensor:
        return run(self, None, False, dtype, out)

    # the names eager's schemas and this module's callers know them by
    names = ("default", "dim", "dim_out", "out") if kind == "sum" else (
        "default", "dim", "out", "dtype_out")  # fmt: skip
    made = (default, dim, dim_out, whole_out)
    for fn, name in zip(made, names, strict=True):
        fn.__name__ = fn.__qualname__ = f"{kind}_{name}"
    return made


sum_default, sum_dim, sum_dim_out, sum_out = _sum_or_mean("sum", mean=False)
mean_default, mean_dim, mean_out, mean_dtype_out = _sum_or_mean("mean", mean=True)


def _amax(self, dim, keepdim, out, key=None) -> torch.Tensor:
    dims, dest = amax_args(self, dim, keepdim, out)
    if key is not None:
        return _first(key, self, dims, dest, MAX, False, None)
    return reduce_into(self, dims, dest, MAX)


def amax(self: torch.Tensor, dim: Any = (), keepdim: bool = False) -> torch.Tensor:
    key = ("amax", self.shape, self.stride(), self.dtype, _dims_key(dim), keepdim)
    got = _call(key, self)
    return got if got is not None else _amax(self, dim, keepdim, None, key)


def amax_out(
    self: torch.Tensor, dim: Any = (), keepdim: bool = False, *, out: torch.Tensor
) -> torch.Tensor:
    return _amax(self, dim, keepdim, out)


# the gate repeats these functions' launches (native_launch.declare_replay)
declare_replay(
    amax,
    amax_out,
    mean_default,
    mean_dim,
    mean_dtype_out,
    mean_out,
    sum_default,
    sum_dim,
    sum_dim_out,
    sum_out,
)
