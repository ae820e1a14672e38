"""An OpInfo case's inputs, re-created from its seed: what a worker and the judge build.

Kept apart from the suite build (:mod:`opbench.suites.opinfo`) because it runs somewhere
else: the build runs once in the harness, while every worker and the judge re-create
each case's inputs many times (:func:`opbench.suites.materialize.materialize`), and need
neither the mapping nor the profiles to do it. The derived cases of the quick profile
(:mod:`opbench.suites.opinfo_extras`) are built from here too, so this module imports
neither of those.

A case is re-created by :func:`materialize_opinfo`: seed torch, ``random`` and numpy,
re-enumerate the OpInfo's samples (cached in-process per OpInfo, dtype, kind, seed and
device), take the sample by index, run the variant under a dispatch mode that stops at
the overload's call and return the ATen-level ``(args, kwargs)`` it would have received
(fresh tensors: the candidate may write into them), re-laid out when the case has a
``layout`` (:func:`_with_layout`). A new trial seed just re-seeds the generators: same
shapes, new values. :func:`opinfo_inputs` adds the special values a case's ``values``
param and its seed ask for (:mod:`opbench.suites.special_values`).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from opbench.suites.case import Case
from opbench.suites.opinfo_samples import (
    RNG_LOCK,
    Recorder,
    StopCapture,
    cached_samples,
    call_variant,
    clone_tree,
    dtype_from_name,
    not_runnable,
    on_device,
    opinfos_by_key,
    seed_all,
)
from opbench.suites.special_values import (
    SPECIAL_VALUES,
    inject_specials,
    loop_bound_argument,
    special_seeds,
)

__all__ = ["LAYOUT_STRIDED", "materialize_opinfo", "opinfo_inputs"]

#: ``case.params["layout"]`` of a case whose tensor arguments are strided copies
#: (:func:`_strided_copy`) of the sample's.
LAYOUT_STRIDED = "strided"


def _strided_copy(t: torch.Tensor, swap_last: bool) -> torch.Tensor:
    """``t``'s values in a tensor that skips every other element of its innermost stored
    dimension (the skipped ones are zeros, so a kernel that reads them reads the same
    thing in every process), with ``swap_last`` also storing the last two dimensions
    swapped: a (20, 20) tensor gets strides (2, 40). Never overlapping, so it is also a
    valid ``self`` of an in-place op, which must write through these strides."""
    shape = list(t.shape)
    if swap_last:
        shape[-1], shape[-2] = shape[-2], shape[-1]
    buf = torch.zeros((*shape[:-1], 2 * shape[-1]), dtype=t.dtype, device=t.device)
    view = buf[..., ::2]
    if swap_last:
        view = view.transpose(-1, -2)
    with torch.no_grad():
        view.copy_(t)
    return view


def _with_layout(args: list[Any]) -> list[Any]:
    """The positional arguments with every tensor of two or more elements replaced by a
    strided copy (:func:`_strided_copy`); the first one, usually ``self``, also has its
    last two dimensions swapped, so inputs do not share strides (a kernel that indexes
    ``other`` with ``self``'s strides fails too). ``out`` (a keyword) stays as mapped."""
    copies: dict[int, torch.Tensor] = {}  # the same tensor twice stays one tensor
    result: list[Any] = []
    for a in args:
        if (
            isinstance(a, torch.Tensor)
            and type(a) is torch.Tensor
            and a.layout == torch.strided
            and a.dim() >= 1
            and a.numel() >= 2
        ):
            if id(a) not in copies:
                copies[id(a)] = _strided_copy(a, swap_last=not copies and a.dim() >= 2)
            a = copies[id(a)]
        result.append(a)
    return result


def _make_out(spec: Any, device: str) -> Any:
    """An ``out`` argument made from a mapping entry's ``out`` layout."""
    if isinstance(spec, list):
        return tuple(_make_out(s, device) for s in spec)
    # zeros, not empty: some out= kernels read their out tensor (as workspace), and
    # uninitialised memory would make the same case differ from run to run
    t = torch.empty_strided(
        spec["shape"],
        spec["stride"],
        dtype=dtype_from_name(spec["dtype"]),
        device="cpu" if spec.get("cpu") else device,
    )
    return t.zero_()


def materialize_opinfo(
    case: Case, device: str | torch.device, seed: int
) -> tuple[list[Any], dict[str, Any]]:
    """Re-create the ATen-level ``(args, kwargs)`` of an OpInfo case from ``seed``.

    Raises :class:`opbench.suites.inputs.NotRunnable` when the sample cannot be made
    (unknown OpInfo in this torch, index out of range, or the sample no longer reaches
    the case's overload).
    """
    p = case.params
    device = str(torch.device(device))
    key = (p.get("opinfo"), p.get("variant_test_name", ""))
    try:
        info = opinfos_by_key()[key]
    except KeyError:
        raise not_runnable(
            f"no OpInfo {key[0]!r} ({key[1]!r}) in torch {torch.__version__}"
        ) from None
    try:
        samples = cached_samples(
            key[0], key[1], device, p["dtype"], p.get("kind", "sample"), int(seed)
        )
    except Exception as e:
        raise not_runnable(f"OpInfo {key[0]} samples failed: {type(e).__name__}: {e}") from None
    idx = int(p["index"])
    if idx >= len(samples):
        raise not_runnable(
            f"OpInfo {key[0]} has {len(samples)} samples with seed {seed}, not {idx + 1}"
        )
    sample = samples[idx]
    inp, args, kwargs = clone_tree((sample.input, tuple(sample.args), dict(sample.kwargs)))
    variant = p.get("variant", "functional")
    out = _make_out(p["out"], device) if variant == "out" and p.get("out") is not None else None
    from opbench.spec.ops import canonical_name

    target = canonical_name(case.op)
    rec = Recorder(stop_at=target)
    try:
        # under the generator lock: a Python-level op may draw random numbers before it
        # reaches the overload, which must not disturb another thread's enumeration
        with RNG_LOCK, warnings.catch_warnings(), on_device(device):
            warnings.simplefilter("ignore")  # deprecation notices of the Python-level ops
            seed_all(seed, device)  # and seeded, so what it draws is reproducible
            with rec:
                call_variant(info, variant, inp, args, kwargs, out)
    except StopCapture:
        pass
    except Exception as e:
        raise not_runnable(f"OpInfo {key[0]} sample {idx}: {type(e).__name__}: {e}") from None
    if rec.captured is None:
        raise not_runnable(
            f"OpInfo {key[0]} sample {idx} ({variant}) with seed {seed} does not reach {target}"
        )
    captured_args, captured_kwargs = rec.captured
    layout = p.get("layout")
    if layout == LAYOUT_STRIDED:
        captured_args = _with_layout(captured_args)
    elif layout is not None:
        raise not_runnable(f"unknown layout {layout!r} in an OpInfo case")
    return captured_args, captured_kwargs


def opinfo_inputs(
    case: Case, device: str | torch.device, seed: int | None = None
) -> tuple[list[Any], dict[str, Any]]:
    """The ``(args, kwargs)`` of an OpInfo case from ``seed`` (default: the case's), as
    :func:`opbench.suites.materialize.materialize` gives them: the sample
    (:func:`materialize_opinfo`), with the special values its ``values`` param asks for
    in its inputs (not ``out``), and in every tensor for the seeds of
    :func:`~opbench.suites.special_values.special_seeds`."""
    seed = case.seed if seed is None else seed
    args, kwargs = materialize_opinfo(case, device, seed)
    values = case.params.get("values")
    if values is not None:
        if values not in SPECIAL_VALUES:
            raise not_runnable(f"unknown values {values!r} in an OpInfo case")
        inputs = _special_targets(case, args, {k: v for k, v in kwargs.items() if k != "out"})
        inject_specials(inputs, seed, large=values == "special", at_least_one=True)
    if seed in special_seeds(case):
        inject_specials(_special_targets(case, args, kwargs), seed)
    return args, kwargs


def _special_targets(
    case: Case, args: list[Any], kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments that may get special values: all but one that bounds a loop in the
    op's kernel (:func:`~opbench.suites.special_values.loop_bound_argument`)."""
    from opbench.spec.ops import get_overload

    bound = loop_bound_argument(get_overload(case.op))
    if bound is None:
        return args, kwargs
    position, name = bound
    return (
        [a for i, a in enumerate(args) if i != position],
        {k: v for k, v in kwargs.items() if k != name},
    )
