"""The OpInfo -> overload mapping: which ATen overload each OpInfo sample reaches, with
the ATen-level arguments it received, cached on disk.

Each sample (and its in-place and ``out=`` variants) is run once under the recording
dispatch mode of :mod:`opbench.suites.opinfo_samples`; a variant that reaches exactly one
compute overload becomes a mapping entry (``op``, ``variant``, ``args`` described in the
trace format, the OpInfo, its sample index, the ``out`` layout, whether its inputs hold
NaN or Inf). :func:`mapping_for`
builds or reads the full mapping of one device type, sample kind and dtype (cached under
``OPBENCH_CACHE_DIR`` keyed by torch version and :data:`MAPPING_VERSION`), or maps only
the OpInfos named (:func:`opinfos_named_for`, from ``opinfo_aliases.json``). Which
overloads are left out of the suite is :func:`excluded`'s. Turning entries into cases is
:mod:`opbench.suites.opinfo`'s.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from opbench.cache import cache_dir
from opbench.suites.opinfo_samples import (
    Recorder,
    cached_samples,
    call_variant,
    clone_tree,
    compute_op,
    describe,
    dtype_name,
    on_device,
    op_db,
)

__all__ = [
    "MAPPING_VERSION",
    "Progress",
    "all_dtypes",
    "excluded",
    "map_group",
    "map_one",
    "mapping_for",
    "opinfos_named_for",
    "self_overlapping",
]

log = logging.getLogger(__name__)

#: Bumped when the mapping format or rules change (invalidates disk caches). 6: entries
#: say whether their inputs hold NaN or Inf (``nonfinite``); 7: not reading out buffers.
MAPPING_VERSION = 7


def excluded(name: str) -> str | None:
    """Why an overload is left out of the suite, or None."""
    from opbench.spec.call import UNINITIALIZED_OPS

    base = name.split(".", 1)[0]
    if base in UNINITIALIZED_OPS:
        return "returns uninitialised memory"
    if "sparse" in base or "mkldnn" in base:
        return "non-strided (sparse/mkldnn) tensors"
    if _is_random(name):
        return "random values (nondeterministic_seeded)"
    return None


def _is_random(name: str) -> bool:
    from opbench.spec.ops import get_overload

    try:
        return torch.Tag.nondeterministic_seeded in get_overload(name).tags
    except AttributeError:
        return True


# --------------------------------------------------------------------------- mapping


def _cache_path(device_type: str, kind: str, dtype: torch.dtype) -> Path:
    key = f"{torch.__version__}|{device_type}|{kind}|{dtype_name(dtype)}|v{MAPPING_VERSION}"
    h = hashlib.sha1(key.encode()).hexdigest()[:10]
    ver = torch.__version__.replace("+", "_")
    return cache_dir() / f"opinfo-{ver}-{device_type}-{kind}-{dtype_name(dtype)}-{h}.json"


def _out_like(result: Any) -> Any:
    if isinstance(result, torch.Tensor):
        return torch.empty_like(result)
    if (
        isinstance(result, (tuple, list))
        and result
        and all(isinstance(r, torch.Tensor) for r in result)
    ):
        return tuple(torch.empty_like(r) for r in result)
    return None


def _out_spec(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        spec = {
            "shape": list(out.shape),
            "stride": list(out.stride()),
            "dtype": dtype_name(out.dtype),
        }
        if out.device.type == "cpu":
            # a result of CPU scalars only (add of two 0-dim CPU tensors in a CUDA run):
            # PyTorch refuses a CUDA out= for it
            spec["cpu"] = True
        return spec
    if isinstance(out, tuple):
        return [_out_spec(o) for o in out]
    return None


def self_overlapping(t: torch.Tensor) -> bool:
    """Whether elements of ``t`` share memory (stride 0, or strides like (1, 1, 7)).

    Writing such a tensor in place is undefined: PyTorch rejects it for most ops, and for
    others reads values it already overwrote; ``polygamma_`` (float64 reference input
    of shape (5, 6, 2), strides (1, 1, 7)) then never returns.

    PyTorch's own check answers "too hard" for every non-dense tensor (a slice with a
    step, a transposed slice); those whose dimensions, sorted by stride, each step over
    everything the smaller ones span are kept as not overlapping (their in-place variant
    is a test: the kernel must write through the strides). 1,997 float32 reference
    samples are such slices; any other "too hard" layout counts as overlapping.
    """
    answer = torch._debug_has_internal_overlap(t)  # 0: no overlap, 1: yes, 2: too hard
    if answer != 2:
        return answer != 0
    span = 0  # the largest offset the smaller-strided dimensions reach
    for stride, size in sorted((abs(s), n) for n, s in zip(t.shape, t.stride()) if n > 1):
        if stride <= span:
            return True
        span += (size - 1) * stride
    return False


def _recorded(
    info: Any, sample: Any, variant: str, out: Any = None
) -> tuple[Any, str | None, str, bool]:
    """Run one variant of a sample on fresh copies of its inputs under the recorder:
    ``(result, the one overload it reached or None, that call's arguments described,
    whether its floating inputs (not ``out``) hold NaN or Inf)``."""
    inp, args, kwargs = clone_tree((sample.input, tuple(sample.args), dict(sample.kwargs)))
    rec = Recorder(see_values=True, variant=variant)
    with rec:
        result = call_variant(info, variant, inp, args, kwargs, out)
    op = compute_op(rec.names)
    if op is None:
        return result, None, "", False
    return result, op, describe(*rec.calls[op]), rec.nonfinite[op]


def map_one(info: Any, sample: Any, device: str) -> list[dict[str, Any]]:
    """Run a sample's variants under the recorder; one entry per variant that maps."""
    entries: list[dict[str, Any]] = []
    try:
        result, op, described, nonfinite = _recorded(info, sample, "functional")
    except Exception:
        return entries
    if op is not None:
        entries.append(
            {"variant": "functional", "op": op, "args": described, "nonfinite": nonfinite}
        )
    more: list[tuple[str, Any]] = []
    if (
        info.inplace_variant is not None
        and isinstance(sample.input, torch.Tensor)
        and not getattr(sample, "broadcasts_input", False)
        and not self_overlapping(sample.input)  # (the copies keep the layout)
    ):
        more.append(("inplace", None))
    out = _out_like(result) if info.supports_out else None
    if out is not None:
        more.append(("out", out))
    for variant, out_arg in more:
        try:
            _, op, described, nonfinite = _recorded(info, sample, variant, out_arg)
        except Exception:
            continue
        if op is None:
            continue
        entry = {"variant": variant, "op": op, "args": described, "nonfinite": nonfinite}
        if out_arg is not None:
            entry["out"] = _out_spec(out_arg)
        entries.append(entry)
    return entries


#: Called with a line saying how far a mapping build is (the CLI shows it).
Progress = Callable[[str], None]


# Like opinfo_mapping.mapping_for's signature, kept apart: builds what that one caches
def _build_mapping(
    device: str,
    kind: str,
    dtype: torch.dtype,
    names: frozenset[str] | None = None,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Every (OpInfo, sample, variant) of one kind and dtype that maps to one overload
    (only the OpInfos called ``names``, when given)."""
    with warnings.catch_warnings(), on_device(device):
        warnings.simplefilter("ignore")
        return _build_mapping_quietly(device, kind, dtype, names, progress)


def _build_mapping_quietly(
    device: str,
    kind: str,
    dtype: torch.dtype,
    names: frozenset[str] | None,
    progress: Progress | None,
) -> list[dict[str, Any]]:
    device_type = torch.device(device).type
    out: list[dict[str, Any]] = []
    infos = [i for i in op_db() if names is None or i.name in names]
    for n, info in enumerate(infos):
        if progress is not None:
            # names the OpInfo being mapped, so a sample that never returns is visible
            progress(
                f"mapping OpInfo {kind} inputs, {dtype_name(dtype)}: {n + 1}/{len(infos)} "
                f"{info.name}"
            )
        try:
            if dtype not in info.supported_dtypes(device_type):
                continue
        except Exception:
            continue
        try:
            samples = cached_samples(
                info.name, info.variant_test_name, device, dtype_name(dtype), kind, 0
            )
        except Exception as e:
            log.debug("OpInfo %s: samples failed: %s", info.name, e)
            continue
        for idx, sample in enumerate(samples):
            try:
                entries = map_one(info, sample, device)
            except Exception as e:  # a sample that cannot run here
                log.debug("OpInfo %s sample %d: %s", info.name, idx, e)
                continue
            for e in entries:
                if _is_random(e["op"]):
                    continue
                e.update(opinfo=info.name, vtn=info.variant_test_name, index=idx)
                out.append(e)
        cached_samples.cache_clear()
    return out


def map_group(device: str, kind: str, dtype: str, names: tuple[str, ...]) -> list[dict[str, Any]]:
    """The serial build over the OpInfos called ``names``, in one of the processes of a
    parallel build (:mod:`opbench.suites.opinfo_mapping_pool`), which share the cores."""
    torch.set_num_threads(1)
    return _build_mapping(device, kind, getattr(torch, dtype), frozenset(names))


@functools.lru_cache(maxsize=1)
def _aliases() -> dict[str, list[str]]:
    """ATen op base name -> the OpInfos whose samples reach it, from full mappings
    (``opinfo_aliases.json``, rebuilt by ``benchmarks/tune/opinfo_aliases.py``)."""
    path = Path(__file__).with_name("opinfo_aliases.json")
    try:
        return json.loads(path.read_text())["aliases"]
    except (OSError, ValueError, KeyError):
        log.warning("no OpInfo alias table at %s: asking for ops by name only", path)
        return {}


def opinfos_named_for(ops: set[str]) -> frozenset[str] | None:
    """The OpInfos to map for ``ops`` (``add.Tensor``, ``add_``, ``relu``): those whose
    ATen name matches, and those a full mapping saw reach the op (:func:`_aliases`:
    ``_softmax`` from ``softmax``, ``addmm`` from ``nn.functional.linear``), so the cases
    are the ones the full mapping would give. None when some asked op is neither named
    nor known to be reached (then the full mapping is needed); backward ops (OpInfo
    samples run forward only) need no OpInfo."""
    from opbench.spec.ops import base_name

    wanted = {base_name(o).rstrip("_") or base_name(o) for o in ops}
    aliases = _aliases()
    known = {info.name for info in op_db()}
    found: set[str] = set()
    matched: set[str] = set()
    for w in wanted:
        reached = [n for n in aliases.get(w, ()) if n in known]
        if reached:
            found.update(reached)
            matched.add(w)
    for info in op_db():
        aten = (getattr(info, "aten_name", None) or info.name).split(".")[-1]
        short = info.name.split(".")[-1]
        for w in wanted:
            if w in (aten, short):
                found.add(info.name)
                matched.add(w)
    unreachable = {w for w in wanted if "backward" in w}
    return frozenset(found) if found and (wanted - unreachable) <= matched else None


# Like opinfo_mapping._build_mapping's signature, kept apart: the cached front of it
def mapping_for(
    device: str,
    kind: str,
    dtype: torch.dtype,
    names: frozenset[str] | None = None,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """The mapping entries of one device type, sample kind and dtype: read from the disk
    cache, or built and cached; only the OpInfos called ``names`` (uncached) when given."""
    if names is not None:  # a subset: quick to map, never cached
        return _build_mapping(device, kind, dtype, names, progress)
    path = _cache_path(torch.device(device).type, kind, dtype)
    if path.exists():
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            log.warning("ignoring unreadable OpInfo mapping cache %s", path)
    from opbench.suites.opinfo_mapping_pool import build_in_processes, map_jobs

    t0 = time.perf_counter()
    jobs = map_jobs()
    built = build_in_processes(device, kind, dtype, jobs, map_group, progress) if jobs > 1 else None
    lost: list[str] = []
    if built is None:
        jobs, entries = 1, _build_mapping(device, kind, dtype, progress=progress)
    else:
        entries, lost = built
    log.info(
        "mapped OpInfo %s inputs for %s on %s in %.1f s (%d variants, %d processes)",
        kind,
        dtype_name(dtype),
        device,
        time.perf_counter() - t0,
        len(entries),
        jobs,
    )
    if lost:
        log.warning(
            "the OpInfo mapping for %s on %s lacks %d OpInfo(s) whose samples gave no answer"
            " (a kernel that never ends?): %s; not cached, so a later build tries them again",
            dtype_name(dtype),
            device,
            len(lost),
            ", ".join(lost),
        )
        return entries
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries))
        tmp.replace(path)
    except OSError as e:
        log.warning("could not cache the OpInfo mapping in %s: %s", path, e)
    return entries


def all_dtypes(device_type: str) -> list[torch.dtype]:
    seen: set[torch.dtype] = set()
    for info in op_db():
        try:
            seen |= set(info.supported_dtypes(device_type))
        except Exception:
            continue
    order = [
        torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.complex64,
        torch.complex128, torch.complex32, torch.int64, torch.int32, torch.int16, torch.int8,
        torch.uint8, torch.bool,
    ]  # fmt: skip
    return [d for d in order if d in seen] + sorted((d for d in seen if d not in order), key=str)
