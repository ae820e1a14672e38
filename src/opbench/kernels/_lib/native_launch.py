"""Native launches of the flat elementwise kernel: what the C++ gate
(:mod:`opbench.backends.native`) needs to launch an op's kernel without entering Python.

Each op function of :mod:`~opbench.kernels._lib.arithmetic` and
:mod:`~opbench.kernels._lib.activations` that the models call most gets an
``opbench_native`` declaration (:func:`declare_flat`, at the end of those modules) (a plain dict, see
:class:`opbench.backends.native.spec.NativeSpec`): its overloads, its operands, which
arguments are its ``p0``/``p1`` (``alpha``, a threshold) and which string picks its kernel
(``approximate``). The gate launches :func:`~opbench.kernels._lib.pointwise_kernels._flat_kernel`
with the same ``FN``, operand modes, compute type and numbers as
:func:`opbench.kernels._lib.pointwise._flat_call` does for that call, so the two paths
compute the same bits (``tests/backends/test_native_gpu.py`` compares them); only the
block size may differ (the gate's smallest is :data:`~opbench.kernels._lib.pointwise.MIN_BLOCK`),
which an elementwise result does not depend on.

A variant is compiled on first use by Triton's own ``warmup`` (no launch), for 16-byte
aligned pointers and an element count divisible by 16 or not, with int32 indexing; the
compiled kernels are kept here so their modules stay loaded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch
import triton.language as tl

from opbench.kernels._lib import pointwise
from opbench.kernels._lib.pointwise import ABSENT, ELEMENT, NUMBER, TENSOR
from opbench.kernels._lib.pointwise_kernels import _flat_kernel

__all__ = ["declare_flat", "flat_compiler", "ptx_param_count"]

#: compiled variants, kept so Triton never unloads a module the gate holds a handle to
_KEEP: list[Any] = []
_ENTRY = re.compile(r"\.entry\s+[\w$]+\s*\((.*?)\)", re.S)


def ptx_param_count(ptx: str) -> int:
    """The parameter count of the (only) kernel entry in ``ptx``."""
    m = _ENTRY.search(ptx)
    if m is None:
        raise ValueError("no .entry in the PTX")
    return m.group(1).count(".param")


def flat_compiler(fns: Sequence[Any], integers: bool = False) -> Any:
    """The ``compile`` of a native declaration launching ``_flat_kernel`` with
    ``fns[choice]``; over integer tensors too with ``integers`` (computed in
    :func:`~opbench.kernels._lib.pointwise.compute_type`'s int64, as the Python path does)."""

    def compile_variant(
        choice: int, a_dtype: torch.dtype, b_mode: int, b_dtype: torch.dtype, block: int,
        div16: bool,
    ) -> tuple[int, int, int, int] | None:  # fmt: skip
        takes = a_dtype.is_floating_point or (
            integers and not a_dtype.is_complex and a_dtype != torch.bool
        )
        if not takes or b_mode not in (ABSENT, TENSOR, ELEMENT, NUMBER):
            return None
        compute = pointwise.compute_type(a_dtype)
        b_ptr = b_dtype if b_mode in (TENSOR, ELEMENT) else a_dtype
        warps = pointwise.NUM_WARPS
        if block < pointwise.BLOCK:
            warps = max(1, min(pointwise.NUM_WARPS, block // (32 * pointwise.SMALL_EPT)))
        kernel = _flat_kernel.warmup(
            a_dtype, b_ptr, a_dtype, a_dtype, 16 if div16 else 17, 0.0, 0.0, 0.0, 0.0, 0.0,
            grid=(1,), FN=fns[choice], A=TENSOR, B=b_mode, C=ABSENT, COMPUTE=compute,
            BLOCK=block, IDX=tl.int32, num_warps=warps,
        )  # fmt: skip
        kernel._init_handles()
        meta = kernel.metadata
        if (
            getattr(meta, "num_ctas", 1) != 1
            or getattr(meta, "global_scratch_size", 0)
            or getattr(meta, "profile_scratch_size", 0)
            or getattr(meta, "launch_cooperative_grid", False)
            or getattr(meta, "launch_pdl", False)
        ):
            return None  # a launch the gate's plain cuLaunchKernel does not make
        params = ptx_param_count(kernel.asm["ptx"])
        if params < 10:
            return None
        _KEEP.append(kernel)
        return int(kernel.function), warps, int(meta.shared), params

    return compile_variant


def declare_flat(
    fn: Any, overloads: tuple[str, ...], fns: Sequence[Any], operands: int, **kw: Any
) -> None:
    """Give the op function ``fn`` a native declaration launching the flat kernel with
    ``fns`` (one, or one per choice); ``kw``: the other fields of
    :class:`~opbench.backends.native.spec.NativeSpec` (``inplace``, ``param_args``, ...)."""
    fn.opbench_native = {
        "overloads": overloads,
        "operands": operands,
        "compile": flat_compiler(fns, kw.get("integers", False)),
        "max_numel": pointwise.I32_SAFE,
        "spread": pointwise.SPREAD,
        "min_block": pointwise.MIN_BLOCK,
        "max_block": pointwise.BLOCK,
        **kw,
    }
