"""The matmul entry points' lanes: a repeat call of an ``mm``, ``addmm``, ``bmm`` or
``baddbmm`` signature (operands' sizes, strides, dtypes and device; the bias's and the
scalars) that one launch served allocates its output and launches that kernel again,
with none of the checks, shape rule, plans or views in between: those ran on the first
call of the signature and decided what the lane launches.

Why: an ``mm`` of 1024^3 spent 35-40 us of host time a call on an H200 where eager
spent 15-17, most of it in the Python between the entry point and the launch
(``benchmarks/probes/matmul_lane.py``, 2026-11-29). A lane is made by the launch that
served the first call (:func:`lane_of`: the TMA kernels', the pointer kernel's; a split-K
product with its sum, :func:`product_lane`) and repeats it through
:func:`~opbench.kernels._lib.tma_launch.repeater`.

A lane declines (the call takes the full path) where an address differs from the first
call's in the 16-byte alignment its kernel was compiled for, or launch hooks are
installed. A lane that raises (the launcher refusing its arguments: nothing launched)
turns lanes off for the process, with a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from opbench.kernels._lib import launch as _launch
from opbench.kernels._lib import tma_launch
from opbench.kernels._lib.launch import remember

__all__ = [
    "LANES",
    "LANES_OFF",
    "keep",
    "lane_key",
    "lane_of",
    "laned",
    "product_lane",
    "run_lane",
]

#: Entry-point calls by signature (:func:`lane_key`) -> the lane of the launch that
#: served the first of them (:func:`lane_of`).
LANES: dict[tuple, Any] = {}

#: Why lanes are off in this process, once one raised (empty while they are on).
LANES_OFF: list[str] = []


def lane_key(*tensors: torch.Tensor, extra: tuple = ()) -> tuple | None:
    """A call's :data:`LANES` key, or None for operands without strides (sparse: the
    checks that follow say what eager says of them)."""
    try:
        return (*((t.shape, t.stride(), t.dtype, t.device) for t in tensors), *extra)
    except (RuntimeError, AttributeError):
        return None


def laned(key: tuple | None, shape: tuple[int, ...], a: torch.Tensor, b: torch.Tensor,
          x: torch.Tensor | None, alpha: Any = 1.0, beta: Any = 1.0) -> torch.Tensor | None:  # fmt: skip
    """The output of ``key``'s lane, launched on ``a``, ``b`` (and bias ``x``), or None
    (no lane, or it declined, or it raised: then lanes are off, with a warning)."""
    lane = LANES.get(key)
    if lane is None:
        return None
    out = torch.empty(shape, dtype=a.dtype, device=a.device)
    pc = out.data_ptr()
    px = pc if x is None else x.data_ptr()
    return out if run_lane(lane, a.data_ptr(), b.data_ptr(), pc, px, alpha, beta) else None


def run_lane(lane: Callable[..., bool], pa: int, pb: int, pc: int, px: int,
             alpha: Any = 1.0, beta: Any = 1.0) -> bool:  # fmt: skip
    """Launch ``lane`` on these addresses and scalars: True once launched, False where it
    declined or raised (then lanes are off in this process, with a warning, and every
    caller, the matmul entry points and the pointwise convolutions alike, takes the full
    path from then on)."""
    try:
        return bool(lane(pa, pb, pc, px, alpha, beta))
    except (TypeError, ValueError) as e:
        LANES.clear()
        LANES_OFF.append(f"{type(e).__name__}: {e}")
        warnings.warn(f"opbench's matmul lanes are off in this process ({LANES_OFF[0]}); "
                      "every call takes the full path", RuntimeWarning, stacklevel=3)  # fmt: skip
        return False


def keep(key: tuple | None, lanes: list) -> None:
    """Keep the first of ``lanes`` (what the served launch appended) under ``key``."""
    if lanes and key is not None and not LANES_OFF:
        remember(LANES, key, lanes[0])


#: One launch a lane repeats: (compiled kernel and its constexpr tail, grid, the launch's
#: arguments with that tail, and which address each of its tensors or descriptors reads:
#: 0 A, 1 B, 2 C, 3 the bias, 4 the split-K workspace)
Step = tuple[tuple[Any, tuple], tuple[int, int, int], tuple, Sequence[int]]


def lane_of(steps: Sequence[Step], has_bias: bool, aligned: tuple[bool, ...], index: int,
            workspace: tuple[int, ...] | None = None) -> Callable[..., bool]:  # fmt: skip
    """A repeat of the launches ``steps`` (one kernel, or a split-K product and its sum)
    as one function of the call's addresses and scalars, ``lane(pa, pb, pc, px, alpha,
    beta)`` (operands A, B, C and the bias, read only with one; ``px`` is C's otherwise).
    Each step's alpha and beta are its last two arguments before the constexpr tail.
    With ``workspace`` (a shape), each call allocates a float32 workspace on device
    ``index`` first, as the full path does. False, having done nothing, where an
    address's 16-byte alignment differs from ``aligned`` (A, B, C, bias: what the
    kernels were compiled for) or launch hooks are installed."""
    repeats = []
    for (k, consts), grid, args, sources in steps:
        n = len(args) - len(consts)
        repeats.append(tma_launch.repeater(k, grid, index, args, sources, (n - 2, n - 1)))
    hooks = _launch._hooks
    device = torch.device("cuda", index)

    def lane(pa: int, pb: int, pc: int, px: int, alpha: float, beta: float) -> bool:
        px = px if has_bias else pc
        seen = (pa & 15 == 0, pb & 15 == 0, pc & 15 == 0, px & 15 == 0)
        if seen != aligned or hooks() != (None, None):
            return False
        addresses: tuple[int, ...] = (pa, pb, pc, px)
        if workspace is not None:
            ws = torch.empty(workspace, dtype=torch.float32, device=device)
            addresses = (*addresses, ws.data_ptr())
        for repeat in repeats:
            repeat(addresses, alpha, beta)
        return True

    return lane


#: A launch :func:`~opbench.kernels._lib.matmul_shared.sum_split_partials` recorded:
#: (compiled kernel and its constexpr tail, grid, arguments with that tail).
Summed = tuple[tuple[Any, tuple], tuple[int, int, int], tuple]


def product_lane(product: Step, summed: Sequence[Summed], has_bias: bool,
                 aligned: tuple[bool, ...], index: int,
                 workspace: tuple[int, ...] | None = None) -> Callable[..., bool] | None:  # fmt: skip
    """The lane (:func:`lane_of`) of a matmul launch ``product`` and, split over K
    (``workspace``: the partials' shape), of the sum launches ``summed`` recorded after
    it, each reading the workspace, C and the bias. One place for the pointer kernel's
    and the TMA kernel's split lanes, so their sum's sources cannot drift apart. None for
    a split whose sum recorded nothing (the interpreter's): a lane without its sum would
    leave C unwritten."""
    if workspace is not None and not summed:
        return None
    steps = [product, *((*s, (4, 2, 3)) for s in summed)]
    return lane_of(steps, has_bias, aligned, index, workspace)
