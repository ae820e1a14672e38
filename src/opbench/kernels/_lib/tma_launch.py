"""Launching a compiled TMA kernel (host-side tensor descriptors) without Triton's
per-call Python: what :mod:`~opbench.kernels._lib.matmul_tma` and
:mod:`~opbench.kernels._lib.matmul_tma_batched` do after a kernel's first launch.

Why: on an H200 a traced 1-2 GFLOP ``mm`` took 52-83 us of host time a call where its
kernel took 10 and eager's whole call 24-38 (``triton-heldout-h200.md``, 2026-11-29), and
a profile of the TMA path (``benchmarks/reproduce/host_profile.py --profile``) put half of
it in Triton's launcher: ``CudaLauncher.__call__`` builds its scratch closures, then a
Python wrapper (``wrap_handle_tensordesc``'s ``inner``) walks every argument and turns
each descriptor into a ``CUtensorMap`` through ``make_tensordesc_arg`` and the driver's
``fill_tma_descriptor``, on every launch.

:func:`launch` does what that wrapper does, with two differences that do not change what
the GPU receives: the descriptor positions and their metadata are read once per compiled
kernel (from the wrapper's own closure), and a ``CUtensorMap`` is kept per (address,
shape, strides, metadata), since it encodes exactly those (a descriptor of another
tensor at the same address and geometry is the same 128 bytes). Where the launcher is
not the one read here (another Triton version, scratch memory, launch hooks installed),
the launch goes through ``CompiledKernel.run`` as before.
"""

from __future__ import annotations

from typing import Any

import torch
import triton

from opbench.kernels._lib import launch as _launch
from opbench.kernels._lib.launch import remember

__all__ = ["Desc", "direct_of", "launch", "tensor_map"]


class Desc:
    """What Triton 3.6's launcher reads from a host-side ``TensorDescriptor``
    (``make_tensordesc_arg``) without the dataclass's per-construction validation."""

    __slots__ = ("base", "shape", "strides", "block_shape", "padding")

    def __init__(self, base: torch.Tensor, shape: list[int], strides: list[int],
                 block_shape: list[int]) -> None:  # fmt: skip
        self.base = base
        self.shape = shape
        self.strides = strides
        self.block_shape = block_shape
        self.padding = "zero"


#: compiled kernel -> its direct launch (:func:`_direct`), or None for the ordinary path
_DIRECT: dict[Any, Any] = {}
#: (address, shape, strides, metadata index, kernel) -> the expanded descriptor arguments
_MAPS: dict[tuple, list[Any]] = {}


def _direct(k: Any) -> tuple | None:
    """``(raw launch, positions, metadata, head, fill, dtype map)`` for launching ``k``
    without Triton's wrapper, or None where its launcher is not Triton 3.6's TMA wrapper
    around a C launch with no scratch memory."""
    if not triton.__version__.startswith("3.6."):
        return None
    run = k.run
    inner = getattr(run, "launch", None)
    code, cells = getattr(inner, "__code__", None), getattr(inner, "__closure__", None)
    if (
        code is None
        or not cells
        or getattr(run, "global_scratch_size", 1)
        or getattr(run, "profile_scratch_size", 1)
    ):
        return None
    free = dict(zip(code.co_freevars, (c.cell_contents for c in cells), strict=True))
    raw, where, metas = (free.get(n) for n in ("launcher", "tensordesc_indices", "tensordesc_meta"))
    if raw is None or not where or not metas or any(m is None for m in metas):
        return None
    try:
        from triton.backends.nvidia import driver as nv
    except ImportError:
        return None
    fill = triton.runtime.driver.active.utils.fill_tma_descriptor
    head = (int(run.launch_cooperative_grid), int(run.launch_pdl), None, None)
    return raw, tuple(sorted(where)), tuple(metas), head, fill, nv.TMA_DTYPE_DEVICE_TO_HOST


def tensor_map(ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], nan: bool, j: int,
               direct: tuple, k: Any) -> list[Any]:  # fmt: skip
    """The launcher's arguments for the ``j``-th descriptor of ``k`` at address ``ptr``
    (``make_tensordesc_arg``'s): its ``CUtensorMap``, shape and strides, kept per address
    and geometry. ``direct`` is :func:`direct_of`'s."""
    key = (ptr, shape, strides, nan, j, k)
    got = _MAPS.get(key)
    if got is None:
        _, _, metas, _, fill, dtypes = direct
        meta = metas[j]
        shape_, strides_ = list(shape), list(strides)
        if meta["fp4_padded"]:
            shape_[-1] *= 2
        tmap = fill(ptr, meta["swizzle"], meta["elem_size"], dtypes[meta["elem_type"]],
                    meta["block_size"], shape_, strides_, 1 if nan else 0)  # fmt: skip
        got = remember(_MAPS, key, [tmap, *shape_, *strides_])
    return got


def direct_of(k: Any) -> tuple | None:
    """:func:`_direct` of compiled kernel ``k``, read once."""
    direct = _DIRECT.get(k, False)
    if direct is False:
        direct = _DIRECT[k] = _direct(k)
    return direct


def launch(k: Any, programs: int, device: torch.device, args: tuple) -> None:
    """Launch compiled kernel ``k`` (its descriptors :class:`Desc`) on ``programs``
    programs of the current stream, as ``CompiledKernel.run`` would."""
    direct = direct_of(k)
    enter, exit_ = _launch._hooks()
    stream = triton.runtime.driver.active.get_current_stream(device.index)
    if direct is None or enter is not None or exit_ is not None:
        metadata = k.launch_metadata((programs, 1, 1), stream, *args) if enter is not None else None
        k.run(programs, 1, 1, stream, k.function, k.packed_metadata, metadata, enter, exit_, *args)
        return
    raw, where, _, head, _, _ = direct
    final: list[Any] = []
    prev = 0
    for j, i in enumerate(where):
        d = args[i]
        final.extend(args[prev:i])
        final.extend(tensor_map(d.base.data_ptr(), tuple(d.shape), tuple(d.strides),
                                d.padding == "nan", j, direct, k))  # fmt: skip
        prev = i + 1
    final.extend(args[prev:])
    raw(programs, 1, 1, stream, k.function, *head, k.packed_metadata, None, None, None, *final)
