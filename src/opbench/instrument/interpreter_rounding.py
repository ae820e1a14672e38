"""Float32 -> bfloat16 under Triton's interpreter, rounded as the GPU rounds it.

A compiled kernel's ``x.to(tl.bfloat16)`` rounds to nearest, ties to even
(``cvt.rn.bf16.f32``), as PyTorch does. Triton's interpreter truncates instead
(``FACTS.md``: one unit in the last place off in ~27% of elements; its
``InterpreterBuilder.cast_impl`` converts with no rounding mode, Triton 3.6 to 3.9). One
element's error is within any bfloat16 tolerance, but truncation is biased toward zero,
and through a model it adds up: the reference backend's CPU check of the Transformer
encoder under ``check-model --autocast bf16`` failed on a weight gradient 2.5 times past
its bound, all of it from ``copy_``'s float32 -> bfloat16 stores (2026-11-30).

:func:`install` wraps the interpreter's cast so that this one conversion rounds to
nearest even, bit for bit as ``torch.Tensor.to(torch.bfloat16)``; every other cast goes
through Triton's own. Only the interpreter changes: compiled kernels never call it.

The harness installs it wherever it runs kernels under the interpreter
(:func:`install_if_interpreting`): in every CPU worker before any candidate code (forked
from the template or not: ``worker.main``), when a backend is loaded on the CPU in-process
(``check-model``, ``opbench.enable``), and in ``tests/kernels``. Not from a kernel directory: the judge's
static scan rightly calls a kernel that patches a module tampering, the reference
backend's included. Every backend judged on the CPU gets the same rounding. Where
Triton's interpreter has no such method (another version), nothing is patched and the
truncation stays, as before.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["install", "install_if_interpreting", "round_to_bf16_bits"]

#: PyTorch's bfloat16 NaN (c10's ``round_to_nearest_even``)
_BF16_NAN = np.uint16(0x7FC0)


def round_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """The bfloat16 bit patterns (``uint16``) of float32 ``x`` rounded to nearest, ties
    to even: c10's ``round_to_nearest_even``, NaN as its quiet NaN."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    out = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        out[nan] = _BF16_NAN
    return out


def install() -> bool:
    """Make the interpreter round float32 -> bfloat16 to nearest even; True if patched
    now, False if it already was or this Triton has no interpreter cast to wrap."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    builder = getattr(interpreter, "InterpreterBuilder", None)
    handle = getattr(interpreter, "TensorHandle", None)
    cast = getattr(builder, "cast_impl", None)
    if builder is None or handle is None or cast is None or getattr(cast, "rounds_bf16", False):
        return False

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            data = round_to_bf16_bits(np.asarray(src.data)).reshape(np.shape(src.data))
            return handle(data, dst_type.scalar)
        return cast(self, src, dst_type)

    cast_impl.rounds_bf16 = True  # type: ignore[attr-defined]
    builder.cast_impl = cast_impl
    return True


def install_if_interpreting() -> bool:
    """:func:`install` when ``TRITON_INTERPRET`` asks for the interpreter."""
    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        return False
    return install()
