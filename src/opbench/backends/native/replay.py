"""Recording a kernel's Python call as launches the C++ gate can repeat without Python.

Why: an op of several launches (a norm's statistics and its output, a split-K product and
its sum, a weight gradient's partials) cannot be declared as one elementwise launch
(:class:`~opbench.backends.native.spec.NativeSpec`), so every call of it entered Python:
on the held-out H200 run at 474f074 such calls read host 0.42-0.65 of eager
(``native_batch_norm_backward`` 131 us a call where eager took 55 and the GPU 24). Yet for
one call signature (every tensor's dtype, shape, strides, offset and alignment, every
number) the Python path makes the same launches every time: the same kernels, grids and
numbers, on addresses that are the call's tensors or tensors it allocated. The gate
(``gate_replay.h``, included by ``gate.cpp``) records those launches on a signature's
first calls and repeats them from then on: it allocates the same buffers, launches the
same kernels with ``cuLaunchKernel`` and returns the same views, at the cost of the
launches alone. A kernel asks for it with its loader (:data:`ATTRIBUTE`).

What is recorded, by :class:`Recorder` while the gate runs the Python function:

* every Triton launch, from the compiled kernel's ``launch_metadata`` (which the launch
  paths call once a launch hook is installed; opbench's lanes and direct launches step
  aside then): the kernel, its grid and its arguments, checked against the kernel's
  signature and its PTX parameter count;
* every PyTorch call, through a dispatch mode: allocations (``empty``, ``empty_strided``,
  ``new_empty``, ``zeros`` ...) become buffers, views and the type-promotion queries
  (``result_type``) are free, ``zero_`` of a whole buffer is a memset; anything else (a
  copy, a PyTorch kernel, reading a value with ``.item()``) makes the signature
  unrepeatable.

A recording is refused, and the call stays a Python call, wherever a launch reads an
address that is neither one of the call's tensors, nor a buffer it allocated, nor scratch
the kernel declared kept (``loader.kept``: a cache kept between calls), passes an integer that falls inside one of those tensors (an address
computed in Python), uses a tensor descriptor Triton does not encode as a plain tiled
``CUtensorMap`` (im2col, fp4, tf32 rounding, no metadata), scratch memory, clusters or
cooperative launch, or where an output is not a view of a buffer or an input itself. The gate repeats
a signature only after two recordings in a row came out the same (a first call that
tunes or compiles launches more than the next), so an integer that moved with the
addresses of the call is caught too where the addresses moved.

The plan handed to the gate (plain tuples; codes as ``gate_replay.h`` reads them)::

    (buffers, steps, outputs, kept)
    buffers: (sizes, strides, dtype code, zeroed)
    steps:   (LAUNCH, function, grid x, y, z, warps, shared bytes, args) | (ZERO, buffer)
    args:    (RAW, 0, bits) | (INPUT, i, byte offset) | (BUFFER, j, byte offset)
             | (KEPT, k, byte offset)
             | (TMAP, 0, byte offset, (region kind, region index, host dtype code, element
                bytes, swizzle, padding, box, shape, strides))
    outputs: (NONE, 0, 0, (), ()) | (INPUT, i, 0, (), ()) | (BUFFER, j, offset, sizes, strides)
    kept:    (bytes, ...): scratch the kernel keeps between calls, every launch leaving it
             as it found it; the gate keeps one of each per stream, zeroed once

``i`` counts the call's tensors in argument order (a list's tensors in place), as the
gate hands them to :meth:`Recorder.begin`.
"""

from __future__ import annotations

import functools
import itertools
import os
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = [
    "ATTRIBUTE",
    "Recorder",
    "raw_bits",
    "replay_enabled",
    "replay_loader",
]

#: the attribute of a kernel function that asks for replay: the loader of its compiled
#: Triton kernels, ``loader(kernel, least) -> (function, warps, shared, params) | None``
#: (:func:`opbench.kernels._lib.native_launch.launch_handle`: the CUfunction loaded in the
#: current context and kept, its warps, shared memory and PTX parameter count; None for a
#: launch a plain ``cuLaunchKernel`` does not make). The loader may carry
#: ``kept(address) -> (first byte, one past the last) | None``: the scratch the kernels keep
#: between calls and leave as they found it
#: (:func:`opbench.kernels._lib.native_launch.keep_scratch`)
ATTRIBUTE = "opbench_replay"
#: step and argument kinds, as ``gate.cpp`` reads them
LAUNCH, ZERO = 0, 1
RAW, INPUT, BUFFER, KEPT, TMAP = 0, 1, 2, 3, 4
NONE = 0
#: the key of a launch's ticket (its recording's id, its number) in its launch metadata
_TICKET = "opbench_replay"

aten = torch.ops.aten
#: calls that allocate (their result becomes a buffer of the plan) and whether it is zeroed
_ALLOCATIONS: dict[Any, bool] = {
    aten.empty.memory_format: False,
    aten.empty_strided.default: False,
    aten.empty_like.default: False,
    aten.new_empty.default: False,
    aten.new_empty_strided.default: False,
    aten.zeros.default: True,
    aten.new_zeros.default: True,
    aten.zeros_like.default: True,
}
#: calls that make a view (no work on the device)
_VIEWS = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.as_strided.default,
    aten.expand.default,
    aten.permute.default,
    aten.transpose.int,
    aten.t.default,
    aten.unsqueeze.default,
    aten.squeeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.slice.Tensor,
    aten.select.int,
    aten.alias.default,
    aten.detach.default,
    aten.split.Tensor,
    aten.split_with_sizes.default,
    aten.unbind.int,
    aten.diagonal.default,
    aten.unfold.default,
    aten.view.dtype,
}
#: calls that read only dtypes and shapes (the promotion rules)
_METADATA = {
    aten.result_type.Tensor,
    aten.result_type.Scalar,
    aten.result_type.Scalar_Tensor,
    aten.result_type.Scalar_Scalar,
    aten.can_cast.default,
}
_ZEROES = {aten.zero_.default}
#: Triton's scalar types: their size in bytes, and how a value is packed
_INTS = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "u1": 1, "u8": 1, "u16": 2,
         "u32": 4, "u64": 8}  # fmt: skip
_FLOATS = {"fp32": "<f", "fp64": "<d"}


def replay_enabled() -> bool:
    """False when ``OPBENCH_REPLAY=0`` (or ``off``/``false``/``no``) turns replay off:
    every call a gate hands to Python then runs the Python function."""
    return os.environ.get("OPBENCH_REPLAY", "1").strip().lower() not in ("0", "off", "false", "no")


def replay_loader(kernel: Any, key: str) -> Callable[..., Any] | None:
    """The loader ``kernel`` (a backend's function for one op) declares for the replay of
    its launches, where a gate on dispatch key ``key`` replays them (CUDA, replay not
    turned off); else None."""
    if key != "CUDA" or not replay_enabled():
        return None
    loader = getattr(kernel, ATTRIBUTE, None)
    return loader if callable(loader) else None


@functools.cache
def _tma_host_types() -> dict[int, int] | None:
    """Triton's map from its TMA element types to the driver's (``CUtensorMapDataType``),
    as its launcher applies it; None where this Triton has none. Read once: a recording
    asks for every descriptor it meets."""
    try:
        from triton.backends.nvidia.driver import TMA_DTYPE_DEVICE_TO_HOST
    except ImportError:
        return None
    return dict(TMA_DTYPE_DEVICE_TO_HOST)


def raw_bits(ty: str, value: Any) -> int | None:
    """The bits of a scalar argument of Triton type ``ty``, as its launcher packs them
    (little-endian, in a 64-bit slot); None for a type not replayed (fp16/bf16 scalars)."""
    if ty in _INTS:
        size = _INTS[ty]
        return int(value) & ((1 << (8 * size)) - 1)
    if ty in _FLOATS:
        packed = struct.pack(_FLOATS[ty], float(value))
        return int.from_bytes(packed.ljust(8, b"\0"), "little")
    return None


class Unrepeatable(Exception):
    """Why a recording cannot be replayed."""


class _Region:
    """An address range a launch may read: one of the call's tensors, or a buffer."""

    def __init__(self, kind: int, index: int, base: int, start: int, end: int) -> None:
        self.kind, self.index, self.base, self.start, self.end = kind, index, base, start, end

    def holds(self, p: int) -> bool:
        return self.start <= p < self.end


def _storage_range(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    start = s.data_ptr()
    return start, start + s.nbytes()


class _Watch(TorchDispatchMode):
    """Every PyTorch call of the recorded function: allocations become buffers."""

    def __init__(self, recording: _Recording) -> None:
        super().__init__()
        self.rec = recording

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        rec = self.rec
        if rec.why is not None or func in _VIEWS or func in _METADATA:
            return out
        if func in _ALLOCATIONS:
            if isinstance(out, torch.Tensor) and out.device.type == rec.device_type:
                rec.buffer(out, zeroed=_ALLOCATIONS[func])
            else:
                rec.refuse(f"{func} allocated off the call's device")
        elif func in _ZEROES:
            rec.zero(args[0])
        else:
            rec.refuse(f"the function called {func}")
        return out


class _Recording:
    """One call's record (see :class:`Recorder`)."""

    def __init__(
        self, inputs: Sequence[torch.Tensor | None], loader: Callable[..., Any], device_type: str
    ) -> None:
        self.loader = loader
        self.kept_of: Callable[[int], tuple[int, int] | None] | None = getattr(loader, "kept", None)
        self.kept: list[tuple[int, int]] = []  # (first byte, one past the last)
        self.device_type = device_type
        self.why: str | None = None
        self.inputs = list(inputs)
        self.regions: list[_Region] = []
        for i, t in enumerate(inputs):
            if (
                isinstance(t, torch.Tensor)
                and t.device.type == device_type
                and t.untyped_storage().nbytes()
            ):
                start, end = _storage_range(t)
                self.regions.append(_Region(INPUT, i, t.data_ptr(), start, end))
        # the call's allocations, in order, and whether each was zeroed (``zeros``)
        self.buffers: list[tuple[torch.Tensor, bool]] = []
        self.steps: list[tuple] = []
        self.pending: dict[int, tuple] = {}  # launch_metadata seen, launch not yet
        self.tickets = itertools.count(1)

    def refuse(self, why: str) -> None:
        if self.why is None:
            self.why = why

    def buffer(self, t: torch.Tensor, zeroed: bool) -> None:
        if t.storage_offset() != 0 or t.untyped_storage().data_ptr() != t.data_ptr():
            self.refuse("an allocation that is a view")
            return
        j = len(self.buffers)
        self.buffers.append((t, zeroed))
        start, end = _storage_range(t)
        if end > start:
            # newest first: an address freed and allocated again is the newer buffer's
            self.regions.insert(0, _Region(BUFFER, j, start, start, end))

    def zero(self, t: torch.Tensor) -> None:
        for j, (b, _) in enumerate(self.buffers):
            if (
                t.data_ptr() == b.data_ptr()
                and t.is_contiguous()
                and t.numel() * t.element_size() == b.untyped_storage().nbytes()
            ):
                self.steps.append((ZERO, j))
                return
        self.refuse("zero_ of a tensor that is not a whole buffer")

    def _kept_span(self, p: int) -> tuple[int, int] | None:
        """The declared kept scratch holding address ``p`` (``loader.kept``), or None."""
        return self.kept_of(p) if self.kept_of is not None else None

    def address(self, p: int) -> tuple[int, int, int]:
        for r in self.regions:
            if r.holds(p):
                return (r.kind, r.index, p - r.base)
        span = self._kept_span(p)
        if span is not None:
            if span not in self.kept:
                self.kept.append(span)
            return (KEPT, self.kept.index(span), p - span[0])
        raise Unrepeatable(f"a launch reads address {p:#x}, outside the call's tensors")

    def is_address(self, p: int) -> bool:
        """Whether ``p`` lies in what :meth:`address` resolves (nothing recorded)."""
        return any(r.holds(p) for r in self.regions) or self._kept_span(p) is not None

    def launch_seen(self, kernel: Any, grid: Sequence[int], args: Sequence[Any]) -> int:
        """Note a launch about to be made; returns its ticket for the enter hook."""
        ticket = next(self.tickets)
        if self.why is None:
            try:
                self.pending[ticket] = self._launch(kernel, grid, args)
            except Unrepeatable as e:
                self.refuse(str(e))
        return ticket

    def launched(self, ticket: int | None) -> None:
        if ticket is None:
            self.refuse("a launch that did not go through launch_metadata")
            return
        step = self.pending.pop(ticket, None)
        if step is not None:
            self.steps.append(step)

    def _launch(self, kernel: Any, grid: Sequence[int], args: Sequence[Any]) -> tuple:
        src = getattr(kernel, "src", None)
        signature = getattr(src, "signature", None)
        if not isinstance(signature, dict) or len(signature) != len(args):
            raise Unrepeatable("a kernel whose signature does not match its arguments")
        packed: list[tuple] = []
        descriptors = 0
        for ty, value in zip(signature.values(), args):
            if not isinstance(ty, str):
                raise Unrepeatable(f"a tuple argument ({ty})")
            if ty == "constexpr":
                continue
            if ty.startswith("tensordesc"):
                packed += self._descriptor(kernel, descriptors, value)
                descriptors += 1
                continue
            if ty.startswith("*"):
                p = value if isinstance(value, int) else getattr(value, "data_ptr", lambda: None)()
                if not isinstance(p, int):
                    raise Unrepeatable(f"a pointer argument of type {type(value).__name__}")
                packed.append((RAW, 0, 0) if p == 0 else self.address(p))
                continue
            bits = raw_bits(ty, value)
            if bits is None:
                raise Unrepeatable(f"an argument of type {ty}")
            if ty in ("i64", "u64") and self.is_address(int(value)):
                raise Unrepeatable("an integer argument that is an address of the call")
            packed.append((RAW, 0, bits))
        handle = self.loader(kernel, len(packed))
        if handle is None:
            raise Unrepeatable(f"{kernel.name}: a launch cuLaunchKernel does not make")
        function, warps, shared, params = handle
        if params > len(packed) + 2:
            raise Unrepeatable(f"{kernel.name}: {params} parameters for {len(packed)} arguments")
        packed += [(RAW, 0, 0)] * (params - len(packed))  # Triton's scratch pointers: null
        g = [int(x) for x in grid] + [1, 1]
        return (LAUNCH, function, g[0], g[1], g[2], warps, shared, tuple(packed))

    def _descriptor(self, kernel: Any, j: int, d: Any) -> list[tuple]:
        """A host-side tensor descriptor, as Triton's launcher expands it (its
        ``make_tensordesc_arg``): one ``CUtensorMap`` encoded over the base's address, then
        the shape (32-bit) and strides (64-bit). The gate encodes the map again over each
        call's address with what this records (``cuTensorMapEncodeTiled``, as Triton's
        ``fill_tma_descriptor`` calls it)."""
        metas = getattr(getattr(kernel, "metadata", None), "tensordesc_meta", None)
        meta = metas[j] if metas and j < len(metas) else None
        if not isinstance(meta, dict):
            raise Unrepeatable("a tensor descriptor without its metadata")
        if (
            meta.get("fp4_padded")
            or meta.get("is_im2col")
            or getattr(d, "round_f32_to_tf32", False)
        ):
            raise Unrepeatable("a tensor descriptor that is not plainly tiled")
        host = _tma_host_types()
        base = getattr(d, "base", None)
        ptr = getattr(base, "data_ptr", lambda: None)()
        shape = [int(x) for x in getattr(d, "shape", ())]
        strides = [int(x) for x in getattr(d, "strides", ())]
        box = [int(x) for x in meta["block_size"]]
        if (host is None or meta["elem_type"] not in host or not isinstance(ptr, int)
                or not 0 < len(shape) == len(strides) == len(box) <= 5 or strides[-1] != 1):  # fmt: skip
            raise Unrepeatable("a tensor descriptor the gate cannot encode")
        kind, index, offset = self.address(ptr)
        padding = 1 if getattr(d, "padding", "zero") == "nan" else 0
        spec = (kind, index, host[meta["elem_type"]], int(meta["elem_size"]), int(meta["swizzle"]),
                padding, tuple(box), tuple(shape), tuple(strides))  # fmt: skip
        return [(TMAP, 0, offset, spec), *((RAW, 0, raw_bits("i32", n)) for n in shape),
                *((RAW, 0, raw_bits("i64", n)) for n in strides)]  # fmt: skip

    def output(self, t: Any, same: int) -> tuple:
        """An output: None, the call's tensor ``same`` itself (the gate compares the
        tensors in C++), or a view of a buffer."""
        if same >= 0:
            return (INPUT, same, 0, (), ())
        if t is None:
            return (NONE, 0, 0, (), ())
        if not isinstance(t, torch.Tensor):
            raise Unrepeatable(f"an output of type {type(t).__name__}")
        for j, (b, _) in enumerate(self.buffers):
            if t.untyped_storage().data_ptr() == b.untyped_storage().data_ptr():
                if t.dtype != b.dtype:
                    raise Unrepeatable("an output viewed as another dtype")
                return (BUFFER, j, t.storage_offset(), tuple(t.shape), tuple(t.stride()))
        raise Unrepeatable("an output that is neither an input nor a buffer of the call")


class _Taps:
    """Triton's launch paths, tapped while any thread records: ``CompiledKernel.launch_metadata``
    patched and a launch enter hook added on the first recording, both removed after the
    last (an installed hook sends every launch through the slower hooked path, and a
    process that records nothing keeps Triton as it was). A launch is noted in the
    innermost recording of its own thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.local = threading.local()
        self.original: Any = None

    def stack(self) -> list[_Recording]:
        st = getattr(self.local, "stack", None)
        if st is None:
            st = self.local.stack = []
        return st

    def push(self, rec: _Recording) -> None:
        from triton import knobs
        from triton.compiler.compiler import CompiledKernel

        st = self.stack()
        for outer in st:  # another op recorded inside: the outer one called an op
            outer.refuse("another operator recorded inside its call")
        st.append(rec)
        with self.lock:
            self.users += 1
            if self.users == 1:
                self.original = CompiledKernel.launch_metadata
                CompiledKernel.launch_metadata = _launch_metadata  # type: ignore[method-assign]
                knobs.runtime.launch_enter_hook.add(self._enter_hook)

    def pop(self, rec: _Recording) -> None:
        from triton import knobs
        from triton.compiler.compiler import CompiledKernel

        st = self.stack()
        if rec in st:
            st.remove(rec)
        with self.lock:
            self.users -= 1
            if self.users == 0:
                CompiledKernel.launch_metadata = self.original  # type: ignore[method-assign]
                knobs.runtime.launch_enter_hook.remove(self._enter_hook)
                self.original = None

    def launch_metadata(self, kernel: Any, grid: Any, stream: Any, *args: Any) -> Any:
        meta = self.original(kernel, grid, stream, *args)
        st = self.stack()
        if st:
            rec = st[-1]
            ticket = rec.launch_seen(kernel, grid, args)
            data = getattr(meta, "data", None)
            if isinstance(data, dict):  # Triton's LazyDict: the hook receives it whole
                data[_TICKET] = (id(rec), ticket)
            else:
                rec.refuse("launch metadata without a LazyDict")
        return meta

    def _enter_hook(self, meta: Any) -> None:
        st = self.stack()
        if st:
            rec = st[-1]
            data = getattr(meta, "data", None)
            tag = data.get(_TICKET) if isinstance(data, dict) else None
            rec.launched(tag[1] if tag is not None and tag[0] == id(rec) else None)


_TAPS = _Taps()


def _launch_metadata(kernel: Any, grid: Any, stream: Any, *args: Any) -> Any:
    """``CompiledKernel.launch_metadata`` while recording (a function: the class calls it
    with the kernel first)."""
    return _TAPS.launch_metadata(kernel, grid, stream, *args)


class Recorder:
    """What the gate calls around the Python function on a signature it has not repeated
    yet: :meth:`begin` with the call's tensors, then :meth:`end` with its outputs (the
    plan, or ``(None, why)``), or :meth:`abort` when the function raised. One per gate;
    the gate never records two calls of its operator at once."""

    def __init__(
        self,
        dtype_code: Callable[[torch.dtype], int],
        loader: Callable[..., Any],
        device_type: str = "cuda",
    ) -> None:
        self._code = dtype_code
        self._loader = loader  # the kernel's declaration (ATTRIBUTE)
        self._device_type = device_type  # "cpu" in the CPU tests of the record
        self._rec: _Recording | None = None
        self._mode: _Watch | None = None

    def begin(self, inputs: Sequence[torch.Tensor | None]) -> None:
        rec = _Recording(inputs, self._loader, self._device_type)
        self._rec = rec
        _TAPS.push(rec)
        self._mode = _Watch(rec)
        self._mode.__enter__()

    def _restore(self) -> _Recording | None:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        rec, self._rec = self._rec, None
        if rec is not None:
            _TAPS.pop(rec)
        return rec

    def abort(self) -> None:
        self._restore()

    def end(self, outputs: Sequence[torch.Tensor | None], same: Sequence[int]) -> tuple:
        """The plan of the call that returned ``outputs`` (``same[k]``: the index of the
        call's tensor that output ``k`` is, or -1), or ``(None, why)``."""
        rec = self._restore()
        if rec is None:
            return (None, "no recording")
        if rec.why is None and rec.pending:
            rec.refuse("a launch that was prepared and not made")
        if rec.why is None and not rec.steps:
            rec.refuse("no launch")
        try:
            outs = tuple(rec.output(t, k) for t, k in zip(outputs, same))
        except Unrepeatable as e:
            rec.refuse(str(e))
        if rec.why is not None:
            return (None, rec.why)
        shaped = _shaped_as_outputs(
            [(tuple(b.shape), tuple(b.stride()), b.dtype, zeroed) for b, zeroed in rec.buffers],
            outs,
        )
        buffers = tuple(
            (sizes, strides, self._code(dtype), zeroed) for sizes, strides, dtype, zeroed in shaped
        )
        kept = tuple(end - start for start, end in rec.kept)
        return ((buffers, tuple(rec.steps), outs, kept), "")


def _extent(sizes: Sequence[int], strides: Sequence[int]) -> int:
    """The elements a tensor of these sizes and strides spans from its first (0: none)."""
    if any(n == 0 for n in sizes):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(sizes, strides))


def _shaped_as_outputs(buffers: list[tuple], outs: tuple[tuple, ...]) -> list[tuple]:
    """The buffers, each that is one output's whole storage (offset 0, the same extent, no
    other output on it: ``mean`` and ``rstd`` allocated flat and returned as ``[N, 1]``)
    allocated in that output's shape instead, so a replay returns the buffer itself rather
    than a view made per call (``as_strided`` goes through the dispatcher). The launches
    address buffers by their first byte, which this keeps."""
    out = list(buffers)
    uses: dict[int, int] = {}
    for kind, j, *_ in outs:
        if kind == BUFFER:
            uses[j] = uses.get(j, 0) + 1
    for kind, j, offset, sizes, strides in outs:
        if kind != BUFFER or uses[j] != 1 or offset != 0:
            continue
        b_sizes, b_strides, dtype, zeroed = out[j]
        if _extent(sizes, strides) == _extent(b_sizes, b_strides) > 0:
            out[j] = (tuple(sizes), tuple(strides), dtype, zeroed)
    return out
