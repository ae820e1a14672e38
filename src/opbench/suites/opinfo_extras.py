"""The quick OpInfo profile's derived cases: a strided and a special-value case for each
elementwise group whose samples lack them.

``sample_inputs`` of the elementwise OpInfos (``UnaryUfuncInfo``, ``BinaryUfuncInfo``
and their subclasses) are mostly contiguous and always finite (``tanh`` has one
contiguous 20x20 tensor), so a kernel that reads its input as if it were contiguous, or
mishandles NaN, would pass the quick profile. :func:`elementwise_extras` gives each
(overload, dtype, variant) group of these OpInfos whose quick cases lack a
non-contiguous input one more case, derived from its largest sample with
``params["layout"] = "strided"``, and each floating group whose quick cases hold no NaN
or Inf one with ``params["values"] = "special"`` (or ``"nonfinite"``); a derived case is
kept only if eager PyTorch runs it. The ``reference_inputs`` hold such samples too, but
re-enumerating them for every trial costs 50-100 ms per OpInfo (tensors of a million
elements); a derived case re-uses the samples already enumerated.

Kept apart from the suite build (:mod:`opbench.suites.opinfo`, which calls
:func:`elementwise_extras` once per dtype) because deriving is a job of its own: it
builds each group's inputs (:mod:`opbench.suites.opinfo_inputs`) and runs eager
PyTorch on them, in spawned processes on a big machine (:func:`derive_extras`, looked up
there by its qualified name, so it stays a module-level function of a module that does
not import the suite build), and keeps what it derives on disk
(:mod:`opbench.suites.opinfo_extras_cache`).
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable
from typing import Any

import torch

from opbench.spec.args import TensorSpec
from opbench.suites.case import Case
from opbench.suites.opinfo_extras_cache import ExtrasCache, group_key
from opbench.suites.opinfo_inputs import LAYOUT_STRIDED, opinfo_inputs
from opbench.suites.opinfo_mapping import MAPPING_VERSION, Progress
from opbench.suites.opinfo_samples import (
    describe,
    dtype_from_name,
    nonfinite_in,
    on_device,
    opinfos_by_key,
)
from opbench.suites.special_values import tensors_in

__all__ = ["EXTRAS_PER_PROCESS", "EXTRAS_STALL_S", "derive_extras", "elementwise_extras"]

log = logging.getLogger(__name__)


def _is_elementwise(params: dict[str, Any]) -> bool:
    """Whether a case's OpInfo is a unary or binary ufunc (or a subclass: the
    ``ElementwiseUnaryPythonRefInfo`` of the Python references)."""
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo

    info = opinfos_by_key().get((params["opinfo"], params["variant_test_name"]))
    return isinstance(info, (UnaryUfuncInfo, BinaryUfuncInfo))


def _input_specs(args_text: str) -> list[TensorSpec]:
    """The tensor inputs (``out`` aside) of a case's description."""
    from opbench.spec.args import ArgsParseError, iter_tensor_specs, parse_args

    try:
        parsed = parse_args(args_text)
    except ArgsParseError:
        return []
    inputs = (parsed.args, {k: v for k, v in parsed.kwargs.items() if k != "out"})
    return list(iter_tensor_specs(inputs))


def _noncontiguous_input(args_text: str) -> bool:
    """Whether a case's description has a non-contiguous tensor input."""
    return any(spec.stride is not None for spec in _input_specs(args_text))


def _largest(cases: list[Case]) -> Case:
    """The case with the most input elements (the first sample of those)."""
    return max(
        cases, key=lambda c: (sum(s.numel for s in _input_specs(c.args)), -c.params["index"])
    )


def _input_tensors(args: list[Any], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    return tensors_in((args, {k: v for k, v in kwargs.items() if k != "out"}))


def _nonfinite_input(case: Case, device: str) -> bool:
    """Whether a case's inputs (as built from its seed) hold NaN or Inf."""
    from opbench.spec.ops import get_overload
    from opbench.suites.inputs import NotRunnable

    try:
        args, kwargs = opinfo_inputs(case, device)
    except NotRunnable:
        return False
    return nonfinite_in(args, kwargs, get_overload(case.op), case.params.get("variant", ""))


def elementwise_extras(
    cases: list[Case],
    device: str,
    nonfinite: dict[int, bool] | None = None,
    *,
    use_cache: bool = True,
    progress: Progress | None = None,
) -> list[Case]:
    """One dtype's quick cases of elementwise OpInfos: for each (overload, variant)
    whose cases lack a non-contiguous input, a ``layout`` case; for each floating one
    whose inputs hold no NaN or Inf, a ``values`` case; both derived from the group's
    largest elementwise sample and kept only where eager PyTorch runs them.

    ``nonfinite``: by ``id`` of a case, whether its inputs hold NaN or Inf, as the
    mapping recorded it; the others are built to find out. Building every case of the
    suite once more took minutes on CUDA (a 4 x H100 host: over 150 s past the mapping,
    2026-11-27), where the mapping had already seen each input. What each group derives
    is kept on disk (:mod:`opbench.suites.opinfo_extras_cache`; ``use_cache=False``
    builds every group), so a machine builds it once."""
    known = nonfinite or {}
    holds_nonfinite = _nonfinite_check(known, device)
    groups: dict[tuple[str, str], list[Case]] = {}
    for c in cases:
        groups.setdefault((c.op, c.params["variant"]), []).append(c)
    cache = (
        ExtrasCache(torch.device(device).type, cases[0].params["dtype"], MAPPING_VERSION)
        if cases and use_cache
        else None
    )
    keys = {k: group_key(g) for k, g in groups.items()}
    kept = {k: cache.get(keys[k]) if cache is not None else None for k in groups}
    missing = [k for k in groups if kept[k] is None]
    what = f"deriving strided and special-value cases, {cases[0].params['dtype']}" if cases else ""
    tell = None if progress is None or not missing else (lambda line: progress(f"{what}: {line}"))
    built = _extras_in_processes([groups[k] for k in missing], device, known, tell)
    if built is None:  # one process: this one
        built = []
        with warnings.catch_warnings(), on_device(device):
            warnings.simplefilter("ignore")
            for n, k in enumerate(missing, 1):
                built.append(_group_extras(groups[k], device, holds_nonfinite))
                if tell is not None and (n % 25 == 0 or n == len(missing)):
                    tell(f"{n}/{len(missing)} groups")
    for k, derived in zip(missing, built):
        kept[k] = derived
        if cache is not None and derived is not None:
            cache.put(keys[k], derived)
    if cache is not None:
        cache.save()
    return [c for k in groups for c in kept[k] or []]


#: Groups to derive before more processes pay for their start (each imports ``op_db``).
EXTRAS_PER_PROCESS = 40
#: Seconds without a finished task after which a derivation pool's tasks still out are
#: given up (:func:`~opbench.suites.opinfo_mapping_pool.run_in_processes`); a task of
#: ~25 groups takes about a second on a GPU host, after a ~15 s process start.
EXTRAS_STALL_S = 90.0


def _extras_in_processes(
    groups: list[list[Case]],
    device: str,
    known: dict[int, bool],
    progress: Progress | None = None,
    *,
    stall_s: float = EXTRAS_STALL_S,
) -> list[list[Case] | None] | None:
    """Each group's derived cases, worked out in spawned processes (as many as the
    mapping uses, :func:`~opbench.suites.opinfo_mapping_pool.map_jobs`); None where one
    process should do it (a small machine, few groups) or the pool broke.

    A task that gives no answer (a kernel that never ends, which no thread can stop) is
    run again one group a task, so that only the group that hangs goes without derived
    cases (None in its place: not kept on disk, so a later build tries again); it is
    named in a warning."""
    from opbench.suites.opinfo_mapping_pool import map_jobs, rerun_alone, run_in_processes

    jobs = min(map_jobs(), len(groups) // EXTRAS_PER_PROCESS)
    if jobs < 2:
        return None
    payload = [[(c.to_dict(), known.get(id(c))) for c in g] for g in groups]
    spread = jobs * 4
    shares = [list(range(k, len(groups), spread)) for k in range(spread)]  # interleaved
    results = run_in_processes(
        derive_extras,
        [(device, [payload[j] for j in share]) for share in shares],
        jobs,
        progress,
        weights=[len(share) for share in shares],
        unit="groups",
        stall_s=stall_s,
    )
    if results is None:
        return None
    out: list[list[Case] | None] = [None] * len(groups)
    for share, result in zip(shares, results):
        for j, derived in zip(share, result or []):
            out[j] = [Case.from_dict(d) for d in derived]
    again = [j for j in range(len(groups)) if out[j] is None]
    retried = rerun_alone(
        derive_extras,
        [(device, [payload[j]]) for j in again],
        jobs,
        progress,
        unit="groups",
        stall_s=stall_s,
    )
    for j, result in zip(again, retried):
        if result is not None:
            out[j] = [Case.from_dict(d) for d in result[0]]
    lost = sorted({groups[j][0].op for j in again if out[j] is None})
    if lost:
        log.warning(
            "no strided or special-value cases for %d group(s) whose derivation gave no"
            " answer in %.0f s: %s",
            len(lost),
            stall_s,
            ", ".join(lost),
        )
    return out


def derive_extras(
    device: str, groups: list[list[tuple[dict[str, Any], bool | None]]]
) -> list[list[dict[str, Any]]]:
    """The derived cases of some groups (cases as dicts, each with the mapping's NaN/Inf
    flag or None), in one spawned process of :func:`_extras_in_processes`."""
    torch.set_num_threads(1)
    out = []
    with warnings.catch_warnings(), on_device(device):
        warnings.simplefilter("ignore")
        for group in groups:
            cases = [Case.from_dict(d) for d, _ in group]
            flags = {id(c): flag for c, (_, flag) in zip(cases, group) if flag is not None}
            derived = _group_extras(cases, device, _nonfinite_check(flags, device))
            out.append([d.to_dict() for d in derived])
    return out


def _nonfinite_check(known: dict[int, bool], device: str) -> Callable[[Case], bool]:
    """Whether a case's inputs hold NaN or Inf: the mapping's answer in ``known`` (by
    ``id`` of the case), else the case's inputs built to find out."""

    def holds_nonfinite(c: Case) -> bool:
        seen = known.get(id(c))
        return _nonfinite_input(c, device) if seen is None else seen

    return holds_nonfinite


def _group_extras(
    group: list[Case], device: str, holds_nonfinite: Callable[[Case], bool]
) -> list[Case]:
    """The derived cases of one (overload, variant) group (see :func:`elementwise_extras`)."""
    elementwise = [c for c in group if _is_elementwise(c.params)]
    if not elementwise:
        return []
    base = _largest(elementwise)
    if not any(s.numel >= 2 for s in _input_specs(base.args)):
        # only 0-dim samples of the ufunc (``bool`` reaching ``_to_copy``): derive
        # from another OpInfo's sample of the same group
        base = _largest(group)
    wanted: list[dict[str, Any]] = []
    if not any(_noncontiguous_input(c.args) for c in group):
        wanted.append({"layout": LAYOUT_STRIDED})
    if dtype_from_name(base.params["dtype"]).is_floating_point and not any(
        holds_nonfinite(c) for c in group
    ):
        info = opinfos_by_key()[(base.params["opinfo"], base.params["variant_test_name"])]
        large = getattr(info, "handles_large_floats", True)
        wanted.append({"values": "special" if large else "nonfinite"})
    derived = [_derived_case(base, extra, device) for extra in wanted]
    return [d for d in derived if d is not None]


def _derived_case(base: Case, extra: dict[str, Any], device: str) -> Case | None:
    """``base`` with ``extra`` in its params, described by the inputs it makes; None
    when those inputs lack what ``extra`` asks for or eager PyTorch rejects them."""
    from opbench.spec.ops import get_overload

    case = dataclasses.replace(base, params={**base.params, **extra})
    try:
        args, kwargs = opinfo_inputs(case, device)
        inputs = _input_tensors(args, kwargs)
        if "layout" in extra:
            if not any(not t.is_contiguous() for t in inputs):
                return None
            case = dataclasses.replace(case, args=describe(args, kwargs))
        if "values" in extra and not any(
            t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in inputs
        ):
            return None
        get_overload(case.op)(*args, **kwargs)
    except Exception as e:  # NotRunnable, or the op rejects these values
        log.debug("no %s case for %s: %s", extra, base.op, e)
        return None
    return case
