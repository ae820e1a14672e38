"""The OpInfo suite: PyTorch's own operator samples, each mapped to the ATen overload it
reaches.

PyTorch's ``op_db`` (``torch.testing._internal.common_methods_invocations``; needs
``expecttest``) describes ~700 operators with sample inputs, including the edge cases
PyTorch tests itself on: zero-size and 0-dim tensors, broadcasting, non-contiguous and
strided inputs, NaN/Inf, type promotion. Samples are written against the Python API
(``torch.sin``, ``torch.nn.functional.linear``); opbench judges ATen overloads. So each
sample is run once under a ``TorchDispatchMode`` that records what it dispatches to;
samples that reach exactly one compute overload (views, allocation and ``detach`` do not
count, see :data:`NOISE`) become cases of that overload, with the ATen-level arguments
it received. The mapping is cached on disk (``OPBENCH_CACHE_DIR`` or
``~/.cache/opbench``) keyed by torch version, device type, sample kind and dtype, so
building the suite does not run every sample on every start.

Profiles:

* ``quick`` (default): ``sample_inputs`` in float32 plus one low-precision dtype
  (bfloat16 on CPU, float16 on CUDA), at most :data:`QUICK_MAX_PER_GROUP` samples per
  (overload, dtype, variant), chosen to keep the edge cases (see :func:`_pick_quick`);
* ``full``: ``reference_inputs`` (a superset of ``sample_inputs`` where an OpInfo has
  them) in every dtype the OpInfo supports on the device.

Strides and special values in the quick profile: ``sample_inputs`` of the elementwise
OpInfos (``UnaryUfuncInfo``, ``BinaryUfuncInfo`` and their subclasses) are mostly
contiguous and always finite (``tanh`` has one contiguous 20x20 tensor), so a kernel
that reads its input as if it were contiguous, or mishandles NaN, would pass. Each
(overload, dtype, variant) group of these OpInfos whose quick cases lack a
non-contiguous input gets one more case, derived from its largest sample with
``params["layout"] = "strided"`` (its tensor arguments re-laid out with gaps, see
:func:`_with_layout`; ``out`` keeps its layout); each floating group whose quick cases
hold no NaN or Inf gets one with ``params["values"] = "special"`` (NaN, +-Inf, 0 and
large magnitudes in 1/8 of the elements of its floating inputs, on every trial, see
:mod:`opbench.suites.special_values`; ``"nonfinite"``, without the large magnitudes, for
ops with ``handles_large_floats=False``: ``sin``, ``cos``, ``sinc``). A derived case is
kept only if eager PyTorch runs it (where the op accepts the values). The
``reference_inputs`` hold such samples too, but re-enumerating them for every trial
costs 50-100 ms per OpInfo (tensors of a million elements); a derived case re-uses the
samples already enumerated.

Each sample also yields its in-place variant (``op.inplace_variant``, where the sample
does not broadcast ``self``) and its ``out=`` variant (``op.supports_out``, ``out``
allocated like the functional result). Random ops (tagged ``nondeterministic_seeded``)
are left out: their values cannot be compared.

A case is re-created by :func:`materialize_opinfo`: seed torch, ``random`` and numpy,
re-enumerate the OpInfo's samples (cached in-process per OpInfo, dtype, kind, seed and
device), take the sample by index, run the variant under a dispatch mode that stops at
the overload's call and return the ATen-level ``(args, kwargs)`` it would have received
(fresh tensors: the candidate may write into them), re-laid out when the case has a
``layout``. A new trial seed just re-seeds the generators: same shapes, new values.

This module owns the cases: the profiles, building cases from mapping entries (and the
derived ``layout`` and ``values`` cases), and re-creating a case's inputs. The mapping
itself is :mod:`opbench.suites.opinfo_mapping`'s; ``op_db``, sample enumeration, seeding
and the recording dispatch mode are :mod:`opbench.suites.opinfo_samples`'s. Names
importers know from here are re-exported.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import torch

from opbench.spec.args import TensorSpec
from opbench.suites.case import Case
from opbench.suites.opinfo_extras_cache import ExtrasCache, group_key
from opbench.suites.opinfo_mapping import (
    MAPPING_VERSION,
    Progress,
    all_dtypes,
    excluded,
    map_one,
    mapping_for,
    opinfos_named_for,
    self_overlapping,
)
from opbench.suites.opinfo_samples import (
    NOISE,
    RNG_LOCK,
    OpInfoUnavailable,
    Recorder,
    StopCapture,
    cached_samples,
    call_variant,
    clone_tree,
    compute_op,
    describe,
    dtype_from_name,
    dtype_name,
    enumerate_samples,
    nonfinite_in,
    not_runnable,
    on_device,
    op_db,
    opinfos_by_key,
    seed_all,
    seed_generators,
)
from opbench.suites.special_values import (
    SPECIAL_VALUES,
    inject_specials,
    loop_bound_argument,
    special_seeds,
    tensors_in,
)

__all__ = [
    "OpInfoUnavailable",
    "NOISE",
    "QUICK_MAX_PER_GROUP",
    "LAYOUT_STRIDED",
    "MAPPING_VERSION",
    "Progress",
    "RNG_LOCK",
    "build_opinfo_cases",
    "materialize_opinfo",
    "opinfo_inputs",
    "opinfos_by_key",
    "profile_dtypes",
    "seed_generators",
]

log = logging.getLogger(__name__)

# The names these had before the mapping and the samples got modules of their own:
# tests/suites/test_opinfo*.py and benchmarks/reproduce/opinfo_mapping_profile.py reach for them.
_op_db = op_db
_enumerate = enumerate_samples
_dtype_from_name = dtype_from_name
_compute_op = compute_op
_map_one = map_one
_self_overlapping = self_overlapping
_opinfos_named_for = opinfos_named_for

#: Samples kept per (overload, dtype, variant) in the quick profile.
QUICK_MAX_PER_GROUP = 3

#: ``case.params["layout"]`` of a case whose tensor arguments are strided copies
#: (:func:`_strided_copy`) of the sample's.
LAYOUT_STRIDED = "strided"


def profile_dtypes(device: str, profile: str) -> list[torch.dtype] | None:
    """The dtypes of a profile on a device (``None``: every dtype the OpInfo supports)."""
    if profile == "quick":
        low = torch.float16 if torch.device(device).type == "cuda" else torch.bfloat16
        return [torch.float32, low]
    if profile == "full":
        return None
    raise ValueError(f"unknown profile {profile!r}; choose quick or full")


def _kind_for(profile: str) -> str:
    return "sample" if profile == "quick" else "reference"


_TENSOR_SHAPE = re.compile(r"T\(\[([0-9, ]*)\]")


def _numel(args_text: str) -> int:
    """Total elements of the tensors in a trace-format description (regex: fast)."""
    total = 0
    for m in _TENSOR_SHAPE.finditer(args_text):
        dims = [int(d) for d in m.group(1).replace(" ", "").split(",") if d]
        total += math.prod(dims)
    return total


def _pick_quick(entries: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """Keep up to ``limit`` samples of one group: the largest one first (large inputs
    make the strongest tests: a trivial answer rarely passes them), then edge cases,
    strided inputs before empty ones before 0-dim ones, larger before smaller."""
    if len(entries) <= limit:
        return entries
    sizes = {id(e): _numel(e["args"]) for e in entries}

    def edge(e: dict[str, Any]) -> tuple[int, int]:
        a = e["args"]
        kind = 3 if "stride=" in a else 2 if ("[0" in a or ", 0]" in a) else 1 if "T([]" in a else 0
        return (kind, sizes[id(e)])

    first = max(entries, key=lambda e: sizes[id(e)])
    chosen = [first]
    seen = {first["args"]}
    for e in sorted(entries, key=edge, reverse=True):
        if len(chosen) >= limit:
            break
        if e["args"] in seen:
            continue
        seen.add(e["args"])
        chosen.append(e)
    return sorted(chosen, key=lambda e: e["index"])


def build_opinfo_cases(
    device: str = "cpu",
    profile: str = "quick",
    dtypes: list[torch.dtype] | None = None,
    ops: set[str] | None = None,
    *,
    seed: int = 0,
    opinfo_names: Iterable[str] | None = None,
    hint_ops: set[str] | None = None,
    progress: Progress | None = None,
) -> list[Case]:
    """The OpInfo suite's cases for ``device`` and ``profile``.

    ``dtypes`` narrows the profile's dtypes (for ``full``: intersected with what each
    OpInfo supports); ``ops`` keeps only these overload names (``add.Tensor``; bare op
    names like ``add`` keep every overload of that op). The first call on a machine maps
    every OpInfo sample (tens of seconds); later calls read the cache. ``opinfo_names``
    maps only those OpInfos (``"sin"``, ``"nn.functional.relu"``), uncached: for tests
    and quick looks. ``hint_ops`` (the run's ``--ops``) does the same for the OpInfos
    named like those ops (all of them when some asked op matches no OpInfo's name); it
    selects nothing by itself. ``progress`` hears how far a mapping build is.
    """
    from opbench.spec.ops import base_name

    kind = _kind_for(profile)
    device_type = torch.device(device).type
    wanted = profile_dtypes(device, profile) or all_dtypes(device_type)
    if dtypes:
        wanted = [
            d for d in (wanted if profile == "quick" else all_dtypes(device_type)) if d in dtypes
        ]
        wanted += [d for d in dtypes if d not in wanted]
    selected_ops: set[str] | None = None
    if ops:
        selected_ops = set(ops)
    cases: list[Case] = []
    for dtype in wanted:
        names = frozenset(opinfo_names) if opinfo_names is not None else None
        if names is None and hint_ops:
            # Map only the OpInfos named like the asked ops: seconds, where the full first
            # build takes a minute on CPU and longer on CUDA. Always, not only while no
            # full mapping is cached, so the same command builds the same suite.
            names = opinfos_named_for(hint_ops)
        entries = mapping_for(device, kind, dtype, names, progress)
        if selected_ops is not None:
            entries = [
                e for e in entries if e["op"] in selected_ops or base_name(e["op"]) in selected_ops
            ]
        if profile == "quick":
            groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for e in entries:
                groups.setdefault((e["op"], e["variant"]), []).append(e)
            entries = [e for g in groups.values() for e in _pick_quick(g, QUICK_MAX_PER_GROUP)]
        entries = [e for e in entries if excluded(e["op"]) is None]
        dtype_cases: list[Case] = []
        # what the mapping saw of each case's inputs (drawn from seed 0, as the mapping's)
        nonfinite: dict[int, bool] = {}
        for e in entries:
            params: dict[str, Any] = {
                "opinfo": e["opinfo"],
                "variant_test_name": e["vtn"],
                "variant": e["variant"],
                "dtype": dtype_name(dtype),
                "kind": kind,
                "index": e["index"],
            }
            if e.get("out") is not None:
                params["out"] = e["out"]
            case = Case(
                op=e["op"],
                args=e["args"],
                seed=seed,
                suite="opinfo",
                source="opinfo",
                params=params,
                is_synthetic=False,
            )
            if seed == 0 and "nonfinite" in e:
                nonfinite[id(case)] = e["nonfinite"]
            dtype_cases.append(case)
        cases += dtype_cases
        if profile == "quick":
            cases += _elementwise_extras(dtype_cases, device, nonfinite, progress=progress)
    cases.sort(
        key=lambda c: (
            c.op,
            c.params["dtype"],
            c.params["variant"],
            c.params["opinfo"],
            c.params["index"],
            c.params.get("layout", ""),
            c.params.get("values", ""),
        )
    )
    return cases


# --------------------------------------------------------------------------- derived cases


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


def _elementwise_extras(
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
    from opbench.suites.opinfo_mapping_pool import map_jobs, run_in_processes

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
    if again:
        retried = run_in_processes(
            derive_extras,
            [(device, [payload[j]]) for j in again],
            min(jobs, len(again)),
            progress,
            unit="groups given no answer, one a task",
            stall_s=stall_s,
        )
        for j, result in zip(again, retried or [None] * len(again)):
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
    """The derived cases of one (overload, variant) group (see :func:`_elementwise_extras`)."""
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


# --------------------------------------------------------------------------- materialise


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
