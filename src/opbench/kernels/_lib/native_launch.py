"""Native launches of the elementwise kernels: what the C++ gate
(:mod:`opbench.backends.native`) needs to launch an op's kernel without entering Python.

Each op function of :mod:`~opbench.kernels._lib.arithmetic` and
:mod:`~opbench.kernels._lib.activations` that the models call most gets an
``opbench_native`` declaration (:func:`declare_flat`, at the end of those modules) (a
plain dict, see :class:`opbench.backends.native.spec.NativeSpec`): its overloads, its
operands, which arguments are its ``p0``/``p1`` (``alpha``, a threshold) and which string
picks its kernel (``approximate``). The gate launches
:func:`~opbench.kernels._lib.pointwise_kernels._flat_kernel` with the same ``FN``, operand
modes, compute type and numbers as :func:`opbench.kernels._lib.pointwise._flat_call` does
for that call, and :func:`~opbench.kernels._lib.pointwise_kernels._strided_kernel` for a
broadcast or strided call as :func:`opbench.kernels._lib.pointwise._planned` plans it, so
the two paths compute the same bits (``tests/kernels/test_native_launch.py`` compares
them); only the block size may differ (the gate's smallest is
:data:`~opbench.kernels._lib.pointwise.MIN_BLOCK`), which an elementwise result does not
depend on.

A variant is compiled on first use by Triton's own ``warmup`` (no launch), for 16-byte
aligned pointers; the flat kernel for an element count divisible by 16 or not, with int32
indexing, the strided one per merged rank and index type. The compiled kernels are kept
here so their modules stay loaded.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Sequence
from typing import Any

import torch
import triton.language as tl

from opbench.kernels._lib import pointwise
from opbench.kernels._lib.pointwise import ABSENT, ELEMENT, NUMBER, TENSOR
from opbench.kernels._lib.pointwise_kernels import _flat_kernel, _strided_kernel

__all__ = [
    "declare_flat",
    "declare_replay",
    "flat_compiler",
    "launch_handle",
    "ptx_param_count",
    "strided_compiler",
]

#: compiled variants, kept so Triton never unloads a module the gate holds a handle to
_KEEP: dict[int, Any] = {}
_ENTRY = re.compile(r"\.entry\s+[\w$]+\s*\((.*?)\)", re.S)


def ptx_param_count(ptx: str) -> int:
    """The parameter count of the (only) kernel entry in ``ptx``."""
    m = _ENTRY.search(ptx)
    if m is None:
        raise ValueError("no .entry in the PTX")
    return m.group(1).count(".param")


def _takes(a_dtype: torch.dtype, b_mode: int, integers: bool) -> bool:
    """A variant the kernels compute: floating ``a``, or integer with ``integers``."""
    takes = a_dtype.is_floating_point or (
        integers and not a_dtype.is_complex and a_dtype != torch.bool
    )
    return takes and b_mode in (ABSENT, TENSOR, ELEMENT, NUMBER)


def _kernel_fn(fns: Sequence[Any], choice: int, dtype: torch.dtype) -> Any:
    """``fns[choice]``: one scalar function, or one per dtype (a dict; None where the
    dtype has none, whose calls go to Python)."""
    fn = fns[choice]
    return fn.get(dtype) if isinstance(fn, dict) else fn


def _warps(block: int) -> int:
    """The warps :func:`~opbench.kernels._lib.pointwise.tile_plan` gives a ``block``."""
    if block < pointwise.BLOCK:
        return max(1, min(pointwise.NUM_WARPS, block // (32 * pointwise.SMALL_EPT)))
    return pointwise.NUM_WARPS


def launch_handle(kernel: Any, least: int = 0) -> tuple[int, int, int, int] | None:
    """``(function, warps, shared, params)`` of a compiled Triton kernel, loaded in the
    current context and kept; None for a launch the gate's plain ``cuLaunchKernel`` does
    not make (clusters, scratch memory, cooperative or programmatic launch), or fewer than
    ``least`` parameters (the gate's own arguments). The elementwise variants' loader,
    and the one :func:`declare_replay` hands the gate's recorder."""
    kernel._init_handles()
    meta = kernel.metadata
    if (
        getattr(meta, "num_ctas", 1) != 1
        or getattr(meta, "global_scratch_size", 0)
        or getattr(meta, "profile_scratch_size", 0)
        or getattr(meta, "launch_cooperative_grid", False)
        or getattr(meta, "launch_pdl", False)
    ):
        return None
    params = ptx_param_count(kernel.asm["ptx"])
    if params < least:
        return None
    _KEEP[id(kernel)] = kernel
    return int(kernel.function), int(meta.num_warps), int(meta.shared), params


#: scratch the kernels keep from call to call (:func:`keep_scratch`): the address of its
#: first byte -> one past its last
_KEPT: dict[int, int] = {}


def keep_scratch(t: torch.Tensor) -> torch.Tensor:
    """Declare ``t`` scratch a kernel keeps from call to call that every launch leaves as
    it found it: counters each launch resets to zero, partials no launch reads before it
    writes them. Why: a launch that reads an address outside its call's tensors makes the
    call unrepeatable for the C++ gate's replay (a cache it cannot see), and a whole
    ``sum`` read host 0.69 of eager as a Python call on the held-out H200 run at dde9349.
    Declared, the recorder addresses it as a kept buffer of the plan: the gate allocates
    its own, zeroed once per stream, and never zeroes it again. Returns ``t``."""
    nbytes = t.untyped_storage().nbytes()
    if nbytes:
        start = t.untyped_storage().data_ptr()
        _KEPT[start] = start + nbytes
        weakref.finalize(t, _KEPT.pop, start, None)
    return t


def kept_scratch(address: int) -> tuple[int, int] | None:
    """``(first byte, one past the last)`` of the kept scratch (:func:`keep_scratch`) that
    holds ``address``, or None. The recorder reads it as ``launch_handle.kept``."""
    for start, end in _KEPT.items():
        if start <= address < end:
            return start, end
    return None


launch_handle.kept = kept_scratch  # type: ignore[attr-defined]


def flat_compiler(fns: Sequence[Any], integers: bool = False) -> Any:
    """The ``compile`` of a native declaration launching ``_flat_kernel`` with
    ``fns[choice]``; over integer tensors too with ``integers`` (computed in
    :func:`~opbench.kernels._lib.pointwise.compute_type`'s int64, as the Python path does)."""

    def compile_variant(
        choice: int, a_dtype: torch.dtype, b_mode: int, b_dtype: torch.dtype, block: int,
        div16: bool,
    ) -> tuple[int, int, int, int] | None:  # fmt: skip
        fn = _kernel_fn(fns, choice, a_dtype)
        if fn is None or not _takes(a_dtype, b_mode, integers):
            return None
        b_ptr = b_dtype if b_mode in (TENSOR, ELEMENT) else a_dtype
        warps = _warps(block)
        kernel = _flat_kernel.warmup(
            a_dtype, b_ptr, a_dtype, a_dtype, 16 if div16 else 17, 0.0, 0.0, 0.0, 0.0, 0.0,
            grid=(1,), FN=fn, A=TENSOR, B=b_mode, C=ABSENT,
            COMPUTE=pointwise.compute_type(a_dtype), BLOCK=block, IDX=tl.int32,
            num_warps=warps,
        )  # fmt: skip
        return launch_handle(kernel, 10)

    return compile_variant


def strided_compiler(fns: Sequence[Any], integers: bool = False) -> Any:
    """The ``compile_strided`` of a native declaration: ``_strided_kernel`` with
    ``fns[choice]`` for ``ndim`` merged dims and int32 or int64 (``idx64``) indexing, as
    :func:`~opbench.kernels._lib.pointwise.run` launches it for a broadcast or strided
    call. Its integers are ``do_not_specialize``: one variant serves every layout."""

    def compile_variant(
        choice: int, a_dtype: torch.dtype, b_mode: int, b_dtype: torch.dtype, block: int,
        ndim: int, idx64: bool,
    ) -> tuple[int, int, int, int] | None:  # fmt: skip
        fn = _kernel_fn(fns, choice, a_dtype)
        if fn is None or not _takes(a_dtype, b_mode, integers):
            return None
        if not 1 <= ndim <= pointwise.MAX_DIMS:
            return None
        b_ptr = b_dtype if b_mode in (TENSOR, ELEMENT) else a_dtype
        warps = _warps(block)
        kernel = _strided_kernel.warmup(
            a_dtype, b_ptr, a_dtype, a_dtype, *([17] * 20), 0.0, 0.0, 0.0, 0.0, 0.0,
            grid=(1,), FN=fn, A=TENSOR, B=b_mode, C=ABSENT,
            COMPUTE=pointwise.compute_type(a_dtype), BLOCK=block,
            IDX=tl.int64 if idx64 else tl.int32, NDIM=ndim, num_warps=warps,
        )  # fmt: skip
        return launch_handle(kernel, 29)

    return compile_variant


def declare_flat(
    fn: Any, overloads: tuple[str, ...], fns: Sequence[Any], operands: int, *,
    strided: bool = True, **kw: Any,
) -> None:  # fmt: skip
    """Give the op function ``fn`` a native declaration launching the flat kernel with
    ``fns`` (one, or one per choice; each a scalar function or a dict of one per dtype),
    and the strided kernel for broadcast and strided
    calls unless ``strided`` is False (an op whose result's layout is not the elementwise
    engine's: ``clone`` keeps its input's); ``kw``: the other fields of
    :class:`~opbench.backends.native.spec.NativeSpec` (``inplace``, ``param_args``, ...)."""
    integers = kw.get("integers", False)
    fn.opbench_native = {
        "overloads": overloads,
        "operands": operands,
        "compile": flat_compiler(fns, integers),
        "compile_strided": strided_compiler(fns, integers) if strided else None,
        "max_numel": pointwise.I32_SAFE,
        "spread": pointwise.SPREAD,
        "min_block": pointwise.MIN_BLOCK,
        "max_block": pointwise.BLOCK,
        **kw,
    }


def declare_replay(*fns: Any) -> None:
    """Ask the C++ gate to replay the launches of ``fns``' calls
    (:mod:`opbench.backends.native.replay`): an op of several launches, or an elementwise
    call its native launch does not take (a transposed operand, mixed dtypes), then costs
    a model its launches alone once a call signature has been seen twice. The reference
    backend declares it on every op function: the recorder refuses, per signature, any
    call whose launches it cannot repeat exactly. The declaration is the loader of the
    recorded kernels (:func:`launch_handle`)."""
    for fn in fns:
        fn.opbench_replay = launch_handle
