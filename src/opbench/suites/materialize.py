"""Turn a :class:`~opbench.suites.case.Case` into real inputs on a device.

One entry point for the worker and the judge, so both build bit-identical inputs
from the same case and seed, whatever suite the case came from. Trace cases are built by
:mod:`opbench.suites.inputs`, OpInfo cases by
:func:`opbench.suites.opinfo_inputs.opinfo_inputs` (with the special values of
:mod:`opbench.suites.special_values`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import torch

from opbench.spec.args import parse_args
from opbench.suites.case import Case

# re-exported for the callers of materialize that also read its inputs
from opbench.suites.special_values import inject_specials, special_seeds, tensors_in

__all__ = [
    "KEPT_INPUTS_MAX_BYTES",
    "inject_specials",
    "kept_inputs",
    "materialize",
    "special_seeds",
    "tensors_in",
]


def materialize(
    case: Case, device: str | torch.device, seed: int | None = None
) -> tuple[list[Any], dict[str, Any]]:
    """Build ``(args, kwargs)`` for ``case`` on ``device`` from ``seed`` (default: the case's).

    Raises :class:`opbench.suites.inputs.NotRunnable` when valid inputs cannot be made.
    """
    seed = case.seed if seed is None else seed
    if _kept is not None and case.source == "args":
        return _kept_or_built(_kept, case, device, seed)
    return _build(case, device, seed)


def _build(case: Case, device: str | torch.device, seed: int) -> tuple[list[Any], dict[str, Any]]:
    if case.source == "args":
        from opbench.suites.inputs import make_inputs

        return make_inputs(case.op, parse_args(case.args), device, seed)
    if case.source == "opinfo":
        from opbench.suites.opinfo_inputs import opinfo_inputs

        return opinfo_inputs(case, device, seed)
    raise ValueError(f"unknown case source {case.source!r} for {case.op}")


#: A test's inputs kept by :func:`kept_inputs` up to this many bytes a seed (the storages
#: of its tensors); larger ones are drawn again each time, as without it.
KEPT_INPUTS_MAX_BYTES = 1 << 30

_kept: dict[tuple[str, str, int], tuple[list[Any], dict[str, Any]] | None] | None = None


@contextlib.contextmanager
def kept_inputs() -> Iterator[None]:
    """Within the block, :func:`materialize` builds a trace case's inputs for a seed once
    and hands out copies of them (:func:`~opbench.suites.inputs.copy_inputs`: the same
    values, strides, offsets and shared storages, new tensors) on every later call.

    Why: the worker builds the same two seeds' inputs 5-6 times a test (the correctness
    trials, the repeat, the native route's check, the timing's two draws), and the values
    are drawn on one CPU thread: on the H200 drawing was 20 of the worker's 54 active
    seconds over 40 traced ``add``/``bmm`` rows (py-spy, 2026-12-02), where a copy on the
    device costs microseconds. The worker enters it for one test at a time; the kept
    inputs never reach a kernel, only their copies do. OpInfo cases are small and may
    carry autograd state: always built anew."""
    global _kept
    outer, _kept = _kept, {}
    try:
        yield
    finally:
        _kept = outer


def _kept_or_built(
    kept: dict[tuple[str, str, int], Any], case: Case, device: str | torch.device, seed: int
) -> tuple[list[Any], dict[str, Any]]:
    from opbench.suites.inputs import copy_inputs

    key = (json.dumps(case.to_dict(), sort_keys=True, default=str), str(device), seed)
    if key in kept:
        held = kept[key]
        if held is not None:
            return copy_inputs(*held)
        return _build(case, device, seed)
    args, kwargs = _build(case, device, seed)  # NotRunnable: raised again next time
    tensors = list(tensors_in((args, kwargs)))
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    keep = sum(storages.values()) <= KEPT_INPUTS_MAX_BYTES and not any(
        t.requires_grad or type(t) is not torch.Tensor for t in tensors
    )
    kept[key] = (args, kwargs) if keep else None
    return copy_inputs(args, kwargs) if keep else (args, kwargs)
