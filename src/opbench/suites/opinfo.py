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
:mod:`opbench.suites.materialize`; ``"nonfinite"``, without the large magnitudes, for
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
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import math
import os
import random
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from opbench.spec.args import TensorSpec, format_args
from opbench.suites.case import Case

__all__ = [
    "OpInfoUnavailable",
    "NOISE",
    "QUICK_MAX_PER_GROUP",
    "LAYOUT_STRIDED",
    "build_opinfo_cases",
    "materialize_opinfo",
    "profile_dtypes",
]

log = logging.getLogger(__name__)

#: Bumped when the mapping format or rules change (invalidates disk caches).
MAPPING_VERSION = 5

#: Samples kept per (overload, dtype, variant) in the quick profile.
QUICK_MAX_PER_GROUP = 3

#: ``case.params["layout"]`` of a case whose tensor arguments are strided copies
#: (:func:`_strided_copy`) of the sample's.
LAYOUT_STRIDED = "strided"

#: Ops that do not count when deciding which overload a sample dispatches to.
NOISE: frozenset[str] = frozenset(
    """
    detach detach_ lift_fresh alias empty empty_like empty_strided new_empty new_empty_strided
    resolve_conj resolve_neg view _unsafe_view _reshape_alias expand t transpose permute
    unsqueeze squeeze slice select as_strided _local_scalar_dense is_nonzero sym_size
    sym_stride sym_numel
    """.split()
)


class OpInfoUnavailable(ImportError):
    """``op_db`` cannot be imported (``expecttest`` or numpy missing)."""


class _NotRunnable(Exception):
    pass


def _not_runnable(reason: str) -> Exception:
    from opbench.suites.inputs import NotRunnable

    return NotRunnable(reason)


@functools.lru_cache(maxsize=1)
def _op_db() -> tuple[Any, ...]:
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except ImportError as e:  # expecttest / numpy
        raise OpInfoUnavailable(
            f"the OpInfo suite needs PyTorch's test helpers ({e}); "
            "install them with: pip install expecttest numpy"
        ) from None
    return tuple(op_db)


@functools.lru_cache(maxsize=1)
def _by_key() -> dict[tuple[str, str], Any]:
    return {(o.name, o.variant_test_name): o for o in _op_db()}


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


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dtype_from_name(name: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dt


# --------------------------------------------------------------------------- seeding / samples


def seed_generators(seed: int, device: str | torch.device = "cpu") -> None:
    """Seed torch's generator for ``device`` (and the CPU one), ``random`` and numpy.

    Cheaper than ``torch.manual_seed``, which on a machine without an initialised GPU
    records a stack trace per call for every lazy accelerator backend.
    """
    torch.default_generator.manual_seed(seed)
    dev = torch.device(device)
    if dev.type == "cuda":
        # that device's generator: ``torch.cuda.manual_seed`` alone seeds the calling
        # thread's current device, which in a harness slot judging cuda:1 is cuda:0
        with torch.cuda.device(dev):
            torch.cuda.manual_seed(seed)


def _seed_all(seed: int, device: str = "cpu") -> None:
    seed_generators(seed, device)
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:
        pass


#: Held while anything seeds and draws from the global generators (sample enumeration
#: here, random ops in the judge): the harness judges from several threads.
RNG_LOCK = threading.RLock()


@functools.lru_cache(maxsize=64)
def _samples(name: str, vtn: str, device: str, dtype_name: str, kind: str, seed: int) -> tuple:
    info = _by_key()[(name, vtn)]
    dtype = _dtype_from_name(dtype_name)
    with RNG_LOCK:  # the harness judges from several threads; the generators are global
        return _enumerate(info, device, dtype, kind, seed)


def _enumerate(info: Any, device: str, dtype: torch.dtype, kind: str, seed: int) -> tuple:
    dev = torch.device(device)
    _seed_all(seed, device)
    # The sample functions are called directly: ``info.sample_inputs`` wraps them in an
    # iterator that re-seeds torch with a fixed seed before every sample (so trial seeds
    # would not change the values) and crawls the stack for each one (slow).
    fn = info.sample_inputs_func
    if kind == "reference" and info.reference_inputs_func is not None:
        fn = info.reference_inputs_func
    # Called with the device *type* ("cuda", not "cuda:1"), on the asked device made
    # current: some sample functions branch on ``device == 'cuda'`` (softmax backward
    # adds float16 samples), so the mapping (built on one GPU) and every later
    # enumeration (on any GPU) must see the same string to get the same sample list.
    with _current(dev):
        return tuple(fn(info, dev.type, dtype, False))


def _current(device: str | torch.device) -> contextlib.AbstractContextManager:
    """Make ``device`` the current CUDA device (where "cuda" factory calls land)."""
    dev = torch.device(device)
    return torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext()


def _clone_tree(obj: Any, memo: dict[int, torch.UntypedStorage] | None = None) -> Any:
    """Fresh tensors with the same layout (strides, offsets) and the same aliasing."""
    memo = {} if memo is None else memo
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        if t.layout != torch.strided or type(t) is not torch.Tensor:
            return t.clone()
        storage = t.untyped_storage()
        key = storage.data_ptr() if storage.nbytes() else id(storage)
        if key not in memo:
            memo[key] = storage.clone()
        new = torch.empty(0, dtype=t.dtype, device=t.device)
        new.set_(memo[key], t.storage_offset(), t.shape, t.stride())
        if t.is_conj():
            new = new.conj()
        if t.is_neg():
            new = new._neg_view()
        return new
    if isinstance(obj, list):
        return [_clone_tree(v, memo) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_clone_tree(v, memo) for v in obj)
    if isinstance(obj, dict):
        return {k: _clone_tree(v, memo) for k, v in obj.items()}
    return obj


def _call_variant(info: Any, variant: str, inp: Any, args: tuple, kwargs: dict, out: Any) -> Any:
    if variant == "functional":
        return info.op(inp, *args, **kwargs)
    if variant == "inplace":
        return info.inplace_variant(inp, *args, **kwargs)
    if variant == "out":
        return info.op(inp, *args, **kwargs, out=out)
    raise ValueError(variant)


# --------------------------------------------------------------------------- dispatch capture


class _Stop(BaseException):
    """Raised from the dispatch mode to stop right before the overload runs."""


def _opname(func: Any) -> str:
    schema = func._schema
    return f"{schema.name.removeprefix('aten::')}.{func._overloadname}"


class _Recorder(TorchDispatchMode):
    """Records every ATen call; with ``stop_at`` it captures that call's arguments and
    stops (raising :class:`_Stop`) before it runs."""

    def __init__(self, stop_at: str | None = None) -> None:
        super().__init__()
        self.names: list[str] = []
        self.stop_at = stop_at
        self.captured: tuple[list[Any], dict[str, Any]] | None = None
        self.calls: dict[str, tuple[list[Any], dict[str, Any]]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        try:
            name = _opname(func)
        except AttributeError:
            name = str(func)
        self.names.append(name)
        if self.stop_at is not None and name == self.stop_at:
            self.captured = (list(args), dict(kwargs))
            raise _Stop()
        if name not in self.calls:
            self.calls[name] = (list(args), dict(kwargs))
        return func(*args, **kwargs)


def _compute_op(names: list[str]) -> str | None:
    """The one overload a sample dispatches to, or None (none, or several)."""
    compute = [n for n in names if n.split(".", 1)[0] not in NOISE]
    if len(compute) == 1:
        return compute[0]
    if not compute and len(set(names)) == 1:
        return names[0]  # a pure view op (permute, t, ...)
    return None


def _describe_value(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        stride = None if v.is_contiguous() else tuple(v.stride())
        return TensorSpec(tuple(v.shape), v.dtype, stride)
    if isinstance(v, (list, tuple)):
        seq = [_describe_value(x) for x in v]
        return seq if isinstance(v, list) else tuple(seq)
    if isinstance(v, dict):
        return {k: _describe_value(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, float, complex, str, torch.dtype, torch.device)):
        return v
    return repr(v)


def _describe(args: list[Any], kwargs: dict[str, Any]) -> str:
    try:
        return format_args((tuple(_describe_value(a) for a in args), _describe_value(kwargs)))
    except ValueError:
        return repr((args, kwargs))[:500]


def _excluded(name: str) -> str | None:
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


def _cache_dir() -> Path:
    root = os.environ.get("OPBENCH_CACHE_DIR") or str(Path.home() / ".cache" / "opbench")
    return Path(root)


def _cache_path(device_type: str, kind: str, dtype: torch.dtype) -> Path:
    key = f"{torch.__version__}|{device_type}|{kind}|{_dtype_name(dtype)}|v{MAPPING_VERSION}"
    h = hashlib.sha1(key.encode()).hexdigest()[:10]
    ver = torch.__version__.replace("+", "_")
    return _cache_dir() / f"opinfo-{ver}-{device_type}-{kind}-{_dtype_name(dtype)}-{h}.json"


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
            "dtype": _dtype_name(out.dtype),
        }
        if out.device.type == "cpu":
            # a result of CPU scalars only (add of two 0-dim CPU tensors in a CUDA run):
            # PyTorch refuses a CUDA out= for it
            spec["cpu"] = True
        return spec
    if isinstance(out, tuple):
        return [_out_spec(o) for o in out]
    return None


def _make_out(spec: Any, device: str) -> Any:
    if isinstance(spec, list):
        return tuple(_make_out(s, device) for s in spec)
    # zeros, not empty: some out= kernels read their out tensor (as workspace), and
    # uninitialised memory would make the same case differ from run to run
    t = torch.empty_strided(
        spec["shape"],
        spec["stride"],
        dtype=_dtype_from_name(spec["dtype"]),
        device="cpu" if spec.get("cpu") else device,
    )
    return t.zero_()


def _self_overlapping(t: torch.Tensor) -> bool:
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


def _recorded(info: Any, sample: Any, variant: str, out: Any = None) -> tuple[Any, str | None, str]:
    """Run one variant of a sample on fresh copies of its inputs under the recorder:
    ``(result, the one overload it reached or None, that call's arguments described)``."""
    inp, args, kwargs = _clone_tree((sample.input, tuple(sample.args), dict(sample.kwargs)))
    rec = _Recorder()
    with rec:
        result = _call_variant(info, variant, inp, args, kwargs, out)
    op = _compute_op(rec.names)
    return result, op, (_describe(*rec.calls[op]) if op is not None else "")


def _map_one(info: Any, sample: Any, device: str) -> list[dict[str, Any]]:
    """Run a sample's variants under the recorder; one entry per variant that maps."""
    entries: list[dict[str, Any]] = []
    try:
        result, op, described = _recorded(info, sample, "functional")
    except Exception:
        return entries
    if op is not None:
        entries.append({"variant": "functional", "op": op, "args": described})
    more: list[tuple[str, Any]] = []
    if (
        info.inplace_variant is not None
        and isinstance(sample.input, torch.Tensor)
        and not getattr(sample, "broadcasts_input", False)
        and not _self_overlapping(sample.input)  # (the copies keep the layout)
    ):
        more.append(("inplace", None))
    out = _out_like(result) if info.supports_out else None
    if out is not None:
        more.append(("out", out))
    for variant, out_arg in more:
        try:
            _, op, described = _recorded(info, sample, variant, out_arg)
        except Exception:
            continue
        if op is None:
            continue
        entry = {"variant": variant, "op": op, "args": described}
        if out_arg is not None:
            entry["out"] = _out_spec(out_arg)
        entries.append(entry)
    return entries


#: Called with a line saying how far a mapping build is (the CLI shows it).
Progress = Callable[[str], None]


def _build_mapping(
    device: str,
    kind: str,
    dtype: torch.dtype,
    names: frozenset[str] | None = None,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Every (OpInfo, sample, variant) of one kind and dtype that maps to one overload
    (only the OpInfos called ``names``, when given)."""
    with warnings.catch_warnings(), _current(device):
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
    infos = [i for i in _op_db() if names is None or i.name in names]
    for n, info in enumerate(infos):
        if progress is not None:
            # names the OpInfo being mapped, so a sample that never returns is visible
            progress(
                f"mapping OpInfo {kind} inputs, {_dtype_name(dtype)}: {n + 1}/{len(infos)} "
                f"{info.name}"
            )
        try:
            if dtype not in info.supported_dtypes(device_type):
                continue
        except Exception:
            continue
        try:
            samples = _samples(
                info.name, info.variant_test_name, device, _dtype_name(dtype), kind, 0
            )
        except Exception as e:
            log.debug("OpInfo %s: samples failed: %s", info.name, e)
            continue
        for idx, sample in enumerate(samples):
            try:
                entries = _map_one(info, sample, device)
            except Exception as e:  # a sample that cannot run here
                log.debug("OpInfo %s sample %d: %s", info.name, idx, e)
                continue
            for e in entries:
                if _is_random(e["op"]):
                    continue
                e.update(opinfo=info.name, vtn=info.variant_test_name, index=idx)
                out.append(e)
        _samples.cache_clear()
    return out


@functools.lru_cache(maxsize=1)
def _aliases() -> dict[str, list[str]]:
    """ATen op base name -> the OpInfos whose samples reach it, from full mappings
    (``opinfo_aliases.json``, rebuilt by ``benchmarks/opinfo_aliases.py``)."""
    path = Path(__file__).with_name("opinfo_aliases.json")
    try:
        return json.loads(path.read_text())["aliases"]
    except (OSError, ValueError, KeyError):
        log.warning("no OpInfo alias table at %s: asking for ops by name only", path)
        return {}


def _opinfos_named_for(ops: set[str]) -> frozenset[str] | None:
    """The OpInfos to map for ``ops`` (``add.Tensor``, ``add_``, ``relu``): those whose
    ATen name matches, and those a full mapping saw reach the op (:func:`_aliases`:
    ``_softmax`` from ``softmax``, ``addmm`` from ``nn.functional.linear``), so the cases
    are the ones the full mapping would give. None when some asked op is neither named
    nor known to be reached (then the full mapping is needed); backward ops (OpInfo
    samples run forward only) need no OpInfo."""
    from opbench.spec.ops import base_name

    wanted = {base_name(o).rstrip("_") or base_name(o) for o in ops}
    aliases = _aliases()
    known = {info.name for info in _op_db()}
    found: set[str] = set()
    matched: set[str] = set()
    for w in wanted:
        reached = [n for n in aliases.get(w, ()) if n in known]
        if reached:
            found.update(reached)
            matched.add(w)
    for info in _op_db():
        aten = (getattr(info, "aten_name", None) or info.name).split(".")[-1]
        short = info.name.split(".")[-1]
        for w in wanted:
            if w in (aten, short):
                found.add(info.name)
                matched.add(w)
    unreachable = {w for w in wanted if "backward" in w}
    return frozenset(found) if found and (wanted - unreachable) <= matched else None


def _mapping(
    device: str,
    kind: str,
    dtype: torch.dtype,
    names: frozenset[str] | None = None,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    if names is not None:  # a subset: quick to map, never cached
        return _build_mapping(device, kind, dtype, names, progress)
    path = _cache_path(torch.device(device).type, kind, dtype)
    if path.exists():
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            log.warning("ignoring unreadable OpInfo mapping cache %s", path)
    t0 = time.perf_counter()
    entries = _build_mapping(device, kind, dtype, progress=progress)
    log.info(
        "mapped OpInfo %s inputs for %s on %s in %.1f s (%d variants)",
        kind,
        _dtype_name(dtype),
        device,
        time.perf_counter() - t0,
        len(entries),
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries))
        tmp.replace(path)
    except OSError as e:
        log.warning("could not cache the OpInfo mapping in %s: %s", path, e)
    return entries


def _all_dtypes(device_type: str) -> list[torch.dtype]:
    seen: set[torch.dtype] = set()
    for info in _op_db():
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
    wanted = profile_dtypes(device, profile) or _all_dtypes(device_type)
    if dtypes:
        wanted = [
            d for d in (wanted if profile == "quick" else _all_dtypes(device_type)) if d in dtypes
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
            names = _opinfos_named_for(hint_ops)
        entries = _mapping(device, kind, dtype, names, progress)
        if selected_ops is not None:
            entries = [
                e for e in entries if e["op"] in selected_ops or base_name(e["op"]) in selected_ops
            ]
        if profile == "quick":
            groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for e in entries:
                groups.setdefault((e["op"], e["variant"]), []).append(e)
            entries = [e for g in groups.values() for e in _pick_quick(g, QUICK_MAX_PER_GROUP)]
        entries = [e for e in entries if _excluded(e["op"]) is None]
        dtype_cases: list[Case] = []
        for e in entries:
            params: dict[str, Any] = {
                "opinfo": e["opinfo"],
                "variant_test_name": e["vtn"],
                "variant": e["variant"],
                "dtype": _dtype_name(dtype),
                "kind": kind,
                "index": e["index"],
            }
            if e.get("out") is not None:
                params["out"] = e["out"]
            dtype_cases.append(
                Case(
                    op=e["op"],
                    args=e["args"],
                    seed=seed,
                    suite="opinfo",
                    source="opinfo",
                    params=params,
                    is_synthetic=False,
                )
            )
        cases += dtype_cases
        if profile == "quick":
            cases += _elementwise_extras(dtype_cases, device)
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

    info = _by_key().get((params["opinfo"], params["variant_test_name"]))
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
    from opbench.suites.materialize import tensors_in

    return tensors_in((args, {k: v for k, v in kwargs.items() if k != "out"}))


def _nonfinite_input(case: Case, device: str) -> bool:
    """Whether a case's inputs (as built from its seed) hold NaN or Inf."""
    from opbench.suites.inputs import NotRunnable
    from opbench.suites.materialize import materialize

    try:
        args, kwargs = materialize(case, device)
    except NotRunnable:
        return False
    return any(
        t.is_floating_point() and not bool(torch.isfinite(t).all())
        for t in _input_tensors(args, kwargs)
    )


def _elementwise_extras(cases: list[Case], device: str) -> list[Case]:
    """One dtype's quick cases of elementwise OpInfos: for each (overload, variant)
    whose cases lack a non-contiguous input, a ``layout`` case; for each floating one
    whose inputs hold no NaN or Inf, a ``values`` case; both derived from the group's
    largest elementwise sample and kept only where eager PyTorch runs them."""
    groups: dict[tuple[str, str], list[Case]] = {}
    for c in cases:
        groups.setdefault((c.op, c.params["variant"]), []).append(c)
    extras: list[Case] = []
    with warnings.catch_warnings(), _current(device):
        warnings.simplefilter("ignore")
        for group in groups.values():
            elementwise = [c for c in group if _is_elementwise(c.params)]
            if not elementwise:
                continue
            base = _largest(elementwise)
            if not any(s.numel >= 2 for s in _input_specs(base.args)):
                # only 0-dim samples of the ufunc (``bool`` reaching ``_to_copy``): derive
                # from another OpInfo's sample of the same group
                base = _largest(group)
            wanted: list[dict[str, Any]] = []
            if not any(_noncontiguous_input(c.args) for c in group):
                wanted.append({"layout": LAYOUT_STRIDED})
            if _dtype_from_name(base.params["dtype"]).is_floating_point and not any(
                _nonfinite_input(c, device) for c in group
            ):
                info = _by_key()[(base.params["opinfo"], base.params["variant_test_name"])]
                large = getattr(info, "handles_large_floats", True)
                wanted.append({"values": "special" if large else "nonfinite"})
            for extra in wanted:
                derived = _derived_case(base, extra, device)
                if derived is not None:
                    extras.append(derived)
    return extras


def _derived_case(base: Case, extra: dict[str, Any], device: str) -> Case | None:
    """``base`` with ``extra`` in its params, described by the inputs it makes; None
    when those inputs lack what ``extra`` asks for or eager PyTorch rejects them."""
    from opbench.spec.ops import get_overload
    from opbench.suites.materialize import materialize

    case = dataclasses.replace(base, params={**base.params, **extra})
    try:
        args, kwargs = materialize(case, device)
        inputs = _input_tensors(args, kwargs)
        if "layout" in extra:
            if not any(not t.is_contiguous() for t in inputs):
                return None
            case = dataclasses.replace(case, args=_describe(args, kwargs))
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
        info = _by_key()[key]
    except KeyError:
        raise _not_runnable(
            f"no OpInfo {key[0]!r} ({key[1]!r}) in torch {torch.__version__}"
        ) from None
    try:
        samples = _samples(key[0], key[1], device, p["dtype"], p.get("kind", "sample"), int(seed))
    except Exception as e:
        raise _not_runnable(f"OpInfo {key[0]} samples failed: {type(e).__name__}: {e}") from None
    idx = int(p["index"])
    if idx >= len(samples):
        raise _not_runnable(
            f"OpInfo {key[0]} has {len(samples)} samples with seed {seed}, not {idx + 1}"
        )
    sample = samples[idx]
    inp, args, kwargs = _clone_tree((sample.input, tuple(sample.args), dict(sample.kwargs)))
    variant = p.get("variant", "functional")
    out = _make_out(p["out"], device) if variant == "out" and p.get("out") is not None else None
    from opbench.spec.ops import canonical_name

    target = canonical_name(case.op)
    rec = _Recorder(stop_at=target)
    try:
        # under the generator lock: a Python-level op may draw random numbers before it
        # reaches the overload, which must not disturb another thread's enumeration
        with RNG_LOCK, warnings.catch_warnings(), _current(device):
            warnings.simplefilter("ignore")  # deprecation notices of the Python-level ops
            _seed_all(seed, device)  # and seeded, so what it draws is reproducible
            with rec:
                _call_variant(info, variant, inp, args, kwargs, out)
    except _Stop:
        pass
    except Exception as e:
        raise _not_runnable(f"OpInfo {key[0]} sample {idx}: {type(e).__name__}: {e}") from None
    if rec.captured is None:
        raise _not_runnable(
            f"OpInfo {key[0]} sample {idx} ({variant}) with seed {seed} does not reach {target}"
        )
    captured_args, captured_kwargs = rec.captured
    layout = p.get("layout")
    if layout == LAYOUT_STRIDED:
        captured_args = _with_layout(captured_args)
    elif layout is not None:
        raise _not_runnable(f"unknown layout {layout!r} in an OpInfo case")
    return captured_args, captured_kwargs
