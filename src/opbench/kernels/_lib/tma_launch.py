"""Launching a compiled TMA kernel (host-side tensor descriptors) through
``CompiledKernel.run``, as ``launch.Launcher`` does on a cache hit: what
:mod:`~opbench.kernels._lib.matmul_tma` and :mod:`~opbench.kernels._lib.matmul_tma_batched`
do after a kernel's first launch (which goes through ``kernel[grid]``), and what a
matmul entry point's lane does (:func:`opbench.kernels._lib.matmul_tma._lane`).

Triton's launcher turns each descriptor into a ``CUtensorMap`` on every launch
(``make_tensordesc_arg``): it reads the descriptor's ``base.data_ptr()``, shape, strides
and padding, nothing else. :class:`Desc` carries those without ``TensorDescriptor``'s
per-construction checks, and :class:`Address` stands in for a base tensor where a lane
holds only an address.

A launch that skipped Triton's wrapper altogether (its C launch, read from the wrapper's
closure, with the ``CUtensorMap``\\ s kept per address) was timed on an H200 on 2026-11-29
(``mm`` 1024^3 16.8 us of host time a call, eager 14.6), but reading a closure is what the
judge's static scan rightly refuses in a kernel directory (``frame-access``), so this
module goes through ``CompiledKernel.run``.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import triton

from opbench.kernels._lib import launch as _launch

__all__ = ["FAST", "Address", "Desc", "kept", "launch"]


#: Triton versions whose ``CompiledKernel.run`` takes descriptors as :class:`Desc` and
#: arguments as ``Launcher`` hands them (read from 3.6's ``CudaLauncher``); others launch
#: through ``kernel[grid]`` every call, as does Triton's interpreter.
FAST = triton.__version__.startswith("3.6.") and os.environ.get("TRITON_INTERPRET", "0") in (
    "",
    "0",
)


def kept(fn: Any, k: Any, constexprs: dict[str, Any]) -> tuple[Any, tuple] | None:
    """What a plan keeps of ``fn``'s first launch, compiled kernel ``k`` on ``constexprs``:
    ``(k, the constexpr values in signature order)``, the tail :func:`launch` appends to
    the runtime arguments; None where later launches go through ``kernel[grid]`` too
    (:data:`FAST`)."""
    if not FAST:
        return None
    return k, tuple(constexprs[p.name] for p in fn.params if p.is_constexpr)


class Address:
    """A base that is only an address: what a descriptor's ``base`` is asked for."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def data_ptr(self) -> int:
        return self.ptr


class Desc:
    """What Triton 3.6's launcher reads from a host-side ``TensorDescriptor``
    (``make_tensordesc_arg``) without the dataclass's per-construction validation."""

    __slots__ = ("base", "shape", "strides", "block_shape", "padding")

    def __init__(self, base: torch.Tensor | Address, shape: list[int], strides: list[int],
                 block_shape: list[int]) -> None:  # fmt: skip
        self.base = base
        self.shape = shape
        self.strides = strides
        self.block_shape = block_shape
        self.padding = "zero"


def launch(k: Any, programs: int, device: torch.device | int, args: tuple) -> None:
    """Launch compiled kernel ``k`` (its descriptors :class:`Desc`) on ``programs``
    programs of the current stream of ``device`` (or its index), as ``CompiledKernel.run``
    is called on a cache hit. Pointer arguments may be tensors or addresses."""
    enter, exit_ = _launch._hooks()
    index = device if isinstance(device, int) else device.index
    stream = triton.runtime.driver.active.get_current_stream(index)
    metadata = k.launch_metadata((programs, 1, 1), stream, *args) if enter is not None else None
    k.run(programs, 1, 1, stream, k.function, k.packed_metadata, metadata, enter, exit_, *args)
