"""PyTorch's OpInfos, their samples, and the dispatch mode that sees which ATen overload a
sample reaches: the pieces both the OpInfo mapping (:mod:`opbench.suites.opinfo_mapping`)
and case materialisation (:mod:`opbench.suites.opinfo_inputs`) are built on.

Owns access to ``op_db`` (:func:`op_db`, :func:`opinfos_by_key`; needs ``expecttest``),
seeding of the global generators (:func:`seed_generators`, :func:`seed_all`, under
:data:`RNG_LOCK`), sample enumeration (:func:`enumerate_samples`, cached in-process by
:func:`cached_samples`), fresh copies of a sample's inputs (:func:`clone_tree`), and the
recording dispatch mode (:class:`Recorder`, :func:`compute_op`, :func:`describe`). Runs in
the harness and in workers (a worker re-creates OpInfo cases from their seeds); imports
no other part of the OpInfo suite.
"""

from __future__ import annotations

import contextlib
import functools
import random
import threading
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from opbench.spec.args import TensorSpec, format_args
from opbench.spec.trees import map_tensors, tensors_in

__all__ = [
    "NOISE",
    "RNG_LOCK",
    "OpInfoUnavailable",
    "Recorder",
    "StopCapture",
    "cached_samples",
    "call_variant",
    "clone_tree",
    "compute_op",
    "describe",
    "dtype_from_name",
    "dtype_name",
    "enumerate_samples",
    "nonfinite_in",
    "not_runnable",
    "on_device",
    "op_db",
    "opinfos_by_key",
    "out_names",
    "seed_all",
    "seed_generators",
]

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


def not_runnable(reason: str) -> Exception:
    """A :class:`opbench.suites.inputs.NotRunnable` saying ``reason``."""
    from opbench.suites.inputs import NotRunnable

    return NotRunnable(reason)


@functools.lru_cache(maxsize=1)
def op_db() -> tuple[Any, ...]:
    """PyTorch's ``op_db``, imported once (~2 s after torch)."""
    try:
        from torch.testing._internal.common_methods_invocations import op_db as infos
    except ImportError as e:  # expecttest / numpy
        raise OpInfoUnavailable(
            f"the OpInfo suite needs PyTorch's test helpers ({e}); "
            "install them with: pip install expecttest numpy"
        ) from None
    return tuple(infos)


@functools.lru_cache(maxsize=1)
def opinfos_by_key() -> dict[tuple[str, str], Any]:
    """PyTorch's OpInfos by ``(name, variant_test_name)``, the key a case's params hold;
    built once per process (a worker's warm-up builds it when asked to preload)."""
    return {(o.name, o.variant_test_name): o for o in op_db()}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_from_name(name: str) -> torch.dtype:
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


def seed_all(seed: int, device: str = "cpu") -> None:
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
def cached_samples(
    name: str, vtn: str, device: str, dtype_name: str, kind: str, seed: int
) -> tuple:
    """:func:`enumerate_samples` of the OpInfo ``(name, vtn)``, cached in-process."""
    info = opinfos_by_key()[(name, vtn)]
    dtype = dtype_from_name(dtype_name)
    with RNG_LOCK:  # the harness judges from several threads; the generators are global
        return enumerate_samples(info, device, dtype, kind, seed)


def enumerate_samples(info: Any, device: str, dtype: torch.dtype, kind: str, seed: int) -> tuple:
    """An OpInfo's ``sample`` or ``reference`` inputs, drawn from ``seed``."""
    dev = torch.device(device)
    seed_all(seed, device)
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
    with on_device(dev):
        return tuple(fn(info, dev.type, dtype, False))


def on_device(device: str | torch.device) -> contextlib.AbstractContextManager:
    """Make ``device`` the current CUDA device (where "cuda" factory calls land)."""
    dev = torch.device(device)
    return torch.cuda.device(dev) if dev.type == "cuda" else contextlib.nullcontext()


def clone_tree(obj: Any, memo: dict[int, torch.UntypedStorage] | None = None) -> Any:
    """Fresh tensors with the same layout (strides, offsets) and the same aliasing."""
    seen: dict[int, torch.UntypedStorage] = {} if memo is None else memo
    return map_tensors(obj, lambda t: _clone_sample_tensor(t, seen))


# Like timing_inputs._clone_tensor, kept apart: see there why the two copies differ.
def _clone_sample_tensor(obj: torch.Tensor, memo: dict[int, torch.UntypedStorage]) -> Any:
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


def call_variant(info: Any, variant: str, inp: Any, args: tuple, kwargs: dict, out: Any) -> Any:
    """Call a sample's ``functional``, ``inplace`` or ``out`` variant."""
    if variant == "functional":
        return info.op(inp, *args, **kwargs)
    if variant == "inplace":
        return info.inplace_variant(inp, *args, **kwargs)
    if variant == "out":
        return info.op(inp, *args, **kwargs, out=out)
    raise ValueError(variant)


# --------------------------------------------------------------------------- dispatch capture


class StopCapture(BaseException):
    """Raised from the dispatch mode to stop right before the overload runs."""


def _opname(func: Any) -> str:
    schema = func._schema
    return f"{schema.name.removeprefix('aten::')}.{func._overloadname}"


def out_names(overload: Any) -> frozenset[str]:
    """The names of an overload's ``out=`` arguments (``out``; ``values`` and ``indices``
    of ``sort.values``): buffers the call writes, whose values before it are garbage."""
    return frozenset(a.name for a in overload._schema.arguments if a.is_out)


def nonfinite_in(
    args: Any, kwargs: dict[str, Any], overload: Any = None, variant: str = "functional"
) -> bool:
    """Whether a call's floating tensor inputs hold NaN or Inf. Never its ``out=``
    buffers, nor, in an OpInfo's ``out`` variant, any argument the call writes (``diff``
    with ``out=`` reaches ``copy_`` with the buffer as ``self``): those are uninitialised,
    and reading them made the answer change from one process to the next (2026-11-27)."""
    skip = {"out"}
    names: list[str | None] = []
    if overload is not None:
        skip |= out_names(overload)
        schema_args = overload._schema.arguments
        names = [a.name for a in schema_args]
        if variant == "out":
            skip |= {a.name for a in schema_args if a.alias_info and a.alias_info.is_write}
    positional = [v for i, v in enumerate(args) if i >= len(names) or names[i] not in skip]
    keyword = {k: v for k, v in kwargs.items() if k not in skip}
    inputs = tensors_in((positional, keyword))
    return any(t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in inputs)


class Recorder(TorchDispatchMode):
    """Records every ATen call; with ``stop_at`` it captures that call's arguments and
    stops (raising :class:`StopCapture`) before it runs. With ``see_values``, also
    whether each recorded call's inputs held NaN or Inf as it was called (an in-place
    call overwrites them: the recorded tensors show its result), ``variant`` being the
    OpInfo variant that runs (:func:`nonfinite_in`)."""

    def __init__(
        self, stop_at: str | None = None, *, see_values: bool = False, variant: str = ""
    ) -> None:
        super().__init__()
        self.variant = variant
        self.names: list[str] = []
        self.stop_at = stop_at
        self.captured: tuple[list[Any], dict[str, Any]] | None = None
        self.calls: dict[str, tuple[list[Any], dict[str, Any]]] = {}
        self.see_values = see_values
        self.nonfinite: dict[str, bool] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        try:
            name = _opname(func)
        except AttributeError:
            name = str(func)
        self.names.append(name)
        if self.stop_at is not None and name == self.stop_at:
            self.captured = (list(args), dict(kwargs))
            raise StopCapture()
        if name not in self.calls:
            self.calls[name] = (list(args), dict(kwargs))
            if self.see_values:
                self.nonfinite[name] = nonfinite_in(args, kwargs, func, self.variant)
        return func(*args, **kwargs)


def compute_op(names: list[str]) -> str | None:
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


def describe(args: list[Any], kwargs: dict[str, Any]) -> str:
    """ATen-level arguments in the trace format (``format_args``), tensors as specs."""
    try:
        return format_args((tuple(_describe_value(a) for a in args), _describe_value(kwargs)))
    except ValueError:
        return repr((args, kwargs))[:500]
