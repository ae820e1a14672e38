"""Turn a :class:`~opbench.suites.case.Case` into real inputs on a device.

One entry point for the worker and the judge, so both build bit-identical inputs
from the same case and seed, whatever suite the case came from. Trace cases are built by
:mod:`opbench.suites.inputs`, OpInfo cases by
:func:`opbench.suites.opinfo_inputs.opinfo_inputs` (with the special values of
:mod:`opbench.suites.special_values`).
"""

from __future__ import annotations

from typing import Any

import torch

from opbench.spec.args import parse_args
from opbench.suites.case import Case

# re-exported for the callers of materialize that also read its inputs
from opbench.suites.special_values import inject_specials, special_seeds, tensors_in

__all__ = ["inject_specials", "materialize", "special_seeds", "tensors_in"]


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
        from opbench.suites.opinfo_inputs import opinfo_inputs

        return opinfo_inputs(case, device, seed)
    raise ValueError(f"unknown case source {case.source!r} for {case.op}")
