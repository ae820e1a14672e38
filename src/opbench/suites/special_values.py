"""Special values in an OpInfo case's inputs: NaN, +-Inf, 0 and large magnitudes,
injected so that a test whose answer zeros or a constant would match gets inputs that
tell the kernel apart (see :func:`special_seeds`). A leaf of the suites: the generic
:func:`opbench.suites.materialize.materialize` and the OpInfo suite's inputs
(:mod:`opbench.suites.opinfo_inputs`, and its derived cases,
:mod:`opbench.suites.opinfo_extras`) build on it, and it imports none of them.
"""

from __future__ import annotations

from typing import Any

import torch

from opbench.spec.trees import tensors_in
from opbench.suites.case import Case, derive_seed

__all__ = [
    "LOOP_BOUND_ARGUMENTS",
    "SPECIAL_FRACTION",
    "SPECIAL_REDRAWS",
    "SPECIAL_VALUES",
    "inject_specials",
    "loop_bound_argument",
    "large_magnitude",
    "special_seeds",
    "tensors_in",
]

#: How many special-value re-draws an OpInfo case may get (see :func:`special_seeds`).
SPECIAL_REDRAWS = 2
#: Share of each floating input's elements replaced by NaN, +Inf, -Inf or 0.
SPECIAL_FRACTION = 0.125
#: ``case.params["values"]`` of an OpInfo case whose every trial gets special values in
#: its floating inputs (not ``out``): ``"special"`` NaN, +-Inf, 0 and +-a large magnitude
#: (:func:`large_magnitude`); ``"nonfinite"`` the same without the large magnitudes, for
#: ops PyTorch does not test on large floats (``handles_large_floats=False``: ``sin``).
SPECIAL_VALUES = ("special", "nonfinite")

#: Ops whose kernels loop as many times as an argument's value says (the polynomials'
#: degree ``n``), by aten base name. That argument gets no special values: the kernels
#: cast ``n`` to int64, which CUDA saturates (+Inf or 1e30 -> 2**63 - 1) and x86 wraps to
#: -2**63 (so the CPU returns 0 at once and never shows it). On CUDA the loop then ends
#: only if the recurrence overflows to NaN (``chebyshev_polynomial_t`` at x = 2, n = 1e30:
#: 0.6 s on an H100); where it stays bounded (Legendre's for |x| < 1, say) it runs ~2**63
#: steps. A quick OpInfo build on a 4 x H100 host sat for minutes deriving these ops'
#: special-value cases, and built in 132 s once ``n`` was spared (2026-11-27).
LOOP_BOUND_ARGUMENTS: dict[str, str] = {
    f"special_{name}": "n"
    for name in (
        "chebyshev_polynomial_t",
        "chebyshev_polynomial_u",
        "chebyshev_polynomial_v",
        "chebyshev_polynomial_w",
        "shifted_chebyshev_polynomial_t",
        "shifted_chebyshev_polynomial_u",
        "shifted_chebyshev_polynomial_v",
        "shifted_chebyshev_polynomial_w",
        "hermite_polynomial_h",
        "hermite_polynomial_he",
        "laguerre_polynomial_l",
        "legendre_polynomial_p",
    )
}


def loop_bound_argument(overload: Any) -> tuple[int, str] | None:
    """The position and name of ``overload``'s argument that bounds a loop in its kernel
    (:data:`LOOP_BOUND_ARGUMENTS`), or None."""
    base = overload._schema.name.removeprefix("aten::")
    wanted = LOOP_BOUND_ARGUMENTS.get(base)
    if wanted is None:
        return None
    for i, arg in enumerate(overload._schema.arguments):
        if arg.name == wanted:
            return i, wanted
    return None


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


def large_magnitude(dtype: torch.dtype) -> float:
    """The large finite magnitude injected into ``dtype`` inputs: 1e4 for float16 (its
    largest finite value is 65504), 1e30 otherwise (finite in bfloat16 and float32, whose
    exp, square or product of two overflows)."""
    return 1e4 if dtype == torch.float16 else 1e30


def inject_specials(
    tree: Any, seed: int, *, large: bool = False, at_least_one: bool = False
) -> None:
    """Set :data:`SPECIAL_FRACTION` of every floating tensor's elements in ``tree`` (in
    place) to NaN, +Inf, -Inf or 0 (with ``large`` also to +-:func:`large_magnitude`),
    positions and values drawn from ``seed``. With ``at_least_one``, every such tensor
    gets at least one NaN or Inf (a draw for a small input often picks none).

    Tensors whose elements overlap in memory (expanded ones) are left alone: writing one
    element would change several.
    """
    g = torch.Generator().manual_seed(seed)
    specials = [float("nan"), float("inf"), float("-inf"), 0.0]
    for t in tensors_in(tree):
        if not t.is_floating_point() or t.numel() == 0:
            continue
        choices = specials
        if large:
            big = large_magnitude(t.dtype)
            choices = specials + [big, -big]
        pick = torch.rand(t.shape, generator=g) < SPECIAL_FRACTION
        values = torch.tensor(choices)[torch.randint(0, len(choices), t.shape, generator=g)]
        if at_least_one and not bool((pick & ~torch.isfinite(values)).any()):
            # the first picked element (or the first one) becomes NaN, +Inf or -Inf
            picked = pick.view(-1).nonzero()
            first = int(picked[0]) if len(picked) else 0
            pick.view(-1)[first] = True
            values.view(-1)[first] = specials[int(torch.randint(0, 3, (), generator=g))]
        try:
            with torch.no_grad():
                t.copy_(torch.where(pick.to(t.device), values.to(t.device, t.dtype), t))
        except RuntimeError:  # overlapping memory (expanded): leave as drawn
            continue
