"""Turn a :class:`~opbench.suites.case.Case` into real inputs on a device.

One entry point for the worker and the judge, so both build bit-identical inputs
from the same case and seed, whatever suite the case came from.
"""

from __future__ import annotations

from typing import Any

import torch

from opbench.spec.args import parse_args
from opbench.suites.case import Case, derive_seed

#: How many special-value re-draws an OpInfo case may get (see :func:`special_seeds`).
SPECIAL_REDRAWS = 2
#: Share of each floating input's elements replaced by NaN, +Inf, -Inf or 0.
SPECIAL_FRACTION = 0.125


def materialize(
    case: Case, device: str | torch.device, seed: int | None = None
) -> tuple[list[Any], dict[str, Any]]:
    """Build ``(args, kwargs)`` for ``case`` on ``device`` from ``seed`` (default: the case's).

    Raises :class:`opbench.suites.inputs.NotRunnable` when valid inputs cannot be made.
    """
    seed = case.seed if seed is None else seed
    if case.source == "args":
        from opbench.suites.inputs import make_inputs

        return make_inputs(case.op, parse_args(case.args), device, seed)
    if case.source == "opinfo":
        from opbench.suites.opinfo import materialize_opinfo

        args, kwargs = materialize_opinfo(case, device, seed)
        if seed in special_seeds(case):
            inject_specials((args, kwargs), seed)
        return args, kwargs
    raise ValueError(f"unknown case source {case.source!r} for {case.op}")


def special_seeds(case: Case) -> list[int]:
    """Seeds whose inputs get special values injected (OpInfo cases only).

    An OpInfo sample's values are what the OpInfo draws: ``isnan`` on data without NaN, or
    ``logical_and`` on data without zeros, has an all-equal answer that zeros or a constant
    would match (a weak test). Re-drawing with another seed draws from the same
    distribution, so for these seeds the sample is built as usual and then a share of
    each floating input is set to NaN, +Inf, -Inf and 0. Stable across processes.
    """
    if case.source != "opinfo":
        return []
    return [derive_seed(case.seed, 2000 + j) for j in range(SPECIAL_REDRAWS)]


def inject_specials(tree: Any, seed: int) -> None:
    """Set :data:`SPECIAL_FRACTION` of every floating tensor's elements in ``tree`` (in
    place) to NaN, +Inf, -Inf or 0, positions and values drawn from ``seed``.

    Tensors whose elements overlap in memory (expanded ones) are left alone: writing one
    element would change several.
    """
    g = torch.Generator().manual_seed(seed)
    specials = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0])
    for t in tensors_in(tree):
        if not t.is_floating_point() or t.numel() == 0:
            continue
        pick = torch.rand(t.shape, generator=g) < SPECIAL_FRACTION
        values = specials[torch.randint(0, 4, t.shape, generator=g)]
        try:
            with torch.no_grad():
                t.copy_(torch.where(pick.to(t.device), values.to(t.device, t.dtype), t))
        except RuntimeError:  # overlapping memory (expanded): leave as drawn
            continue


def tensors_in(obj: Any) -> list[torch.Tensor]:
    """Every tensor in an argument tree (lists, tuples, dict values), in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in tensors_in(v)]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors_in(v)]
    return []
