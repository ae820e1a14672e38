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
:func:`~opbench.suites.opinfo_inputs._with_layout`; ``out`` keeps its layout); each
floating group whose quick cases hold no NaN or Inf gets one with ``params["values"] =
"special"`` (NaN, +-Inf, 0 and large magnitudes in 1/8 of the elements of its floating
inputs, on every trial, see :mod:`opbench.suites.special_values`; ``"nonfinite"``,
without the large magnitudes, for ops with ``handles_large_floats=False``: ``sin``,
``cos``, ``sinc``). A derived case is kept only if eager PyTorch runs it (where the op
accepts the values). Deriving them is :mod:`opbench.suites.opinfo_extras`'s
(:func:`~opbench.suites.opinfo_extras.elementwise_extras`).

Each sample also yields its in-place variant (``op.inplace_variant``, where the sample
does not broadcast ``self``) and its ``out=`` variant (``op.supports_out``, ``out``
allocated like the functional result). Random ops (tagged ``nondeterministic_seeded``)
are left out: their values cannot be compared.

A case is re-created from its seed by :func:`materialize_opinfo` and
:func:`opinfo_inputs` (:mod:`opbench.suites.opinfo_inputs`): the sample re-enumerated
and run again up to the overload's call, with the case's layout and special values.

This module owns building the suite: the profiles and the cases made from mapping
entries. The derived ``layout`` and ``values`` cases are
:mod:`opbench.suites.opinfo_extras`'s; re-creating a case's inputs is
:mod:`opbench.suites.opinfo_inputs`'s; the mapping itself is
:mod:`opbench.suites.opinfo_mapping`'s; ``op_db``, sample enumeration, seeding and the
recording dispatch mode are :mod:`opbench.suites.opinfo_samples`'s. Names importers know
from here are re-exported.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from opbench.spec.args import described_numel
from opbench.suites import opinfo_extras
from opbench.suites.case import Case
from opbench.suites.opinfo_inputs import LAYOUT_STRIDED, materialize_opinfo, opinfo_inputs
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
    compute_op,
    dtype_from_name,
    dtype_name,
    enumerate_samples,
    op_db,
    opinfos_by_key,
    seed_generators,
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


def _pick_quick(entries: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """Keep up to ``limit`` samples of one group: the largest one first (large inputs
    make the strongest tests: a trivial answer rarely passes them), then edge cases,
    strided inputs before empty ones before 0-dim ones, larger before smaller."""
    if len(entries) <= limit:
        return entries
    sizes = {id(e): described_numel(e["args"]) for e in entries}

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
            cases += opinfo_extras.elementwise_extras(
                dtype_cases, device, nonfinite, progress=progress
            )
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
