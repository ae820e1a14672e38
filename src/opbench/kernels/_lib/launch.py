"""The thin launch path: a ``@triton.jit`` function launched through its compiled kernel.

``kernel[grid](*args)`` re-derives Triton's specialization key from every argument on
every call (binding, alignment and integer-value checks, a string cache key), which
costs more host time than eager PyTorch spends on a whole small op (``FACTS.md``: 27 µs
host-inclusive for a tiny add through ``kernel[grid]``, 9.5 µs in eager). A
:class:`Launcher` keys its own cache on what can change the compiled code for *our*
kernels and nothing else:

* every tensor argument's dtype and whether its address is 16-byte aligned (Triton
  specializes pointers on both). Tensors sit where the kernel's unannotated parameters
  are, found once from the signature: testing every argument's type on every call cost
  about 2 µs of a 1,024-element add's host time;
* the values of the constexpr keyword arguments;
* the device index.

Integer arguments enter the key only where a kernel asks (``specialize=("n",)``):
every kernel here annotates its integers ``tl.int64`` and lists the others in
``do_not_specialize`` (:func:`jit_unspecialized` reads them all from the signature), so
Triton compiles one kernel for all their values (it would
otherwise specialize on ``== 1`` and divisibility by 16, and pick i32 or i64 by
magnitude). The element count of a masked 1-D kernel is worth specializing: knowing it
divisible by 16 lets Triton prove the mask constant over a vector and emit 16-byte
loads; without it every f16 element was loaded alone (0.40 of copy bandwidth on a
256 MiB f16 add, against 0.80 in f32; benchmarks/reproduce/triton_backend.py). Float scalars are annotated ``tl.float64`` for the same reason
(and so a float64 op keeps its scalar's precision; kernels cast it to their compute type).

A miss compiles through the ordinary ``kernel[grid](...)`` call, which also launches it,
and keeps the returned ``CompiledKernel``; a hit calls ``CompiledKernel.run`` with the
same argument convention Triton 3.6 through 3.9 use inside ``JITFunction.run``.

PyTorch's static CUDA launcher (``torch._C._StaticCudaLauncher``, Inductor's path) was
tried in its place: over the 247 traced cases of ``benchmarks/reproduce/host_profile.py`` on the
H100 it was no faster (geomean host time 1.04x Triton's launcher, within the run's
noise), and it needs a private binding and cubins written to disk, both of which the
static scan rightly flags in a kernel directory.

Under Triton's interpreter (``TRITON_INTERPRET=1``, CPU tensors) there is no compiled
kernel: every launch goes through ``kernel[grid](...)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
import triton

__all__ = [
    "INTERPRETING",
    "PLAN_LIMIT",
    "Launcher",
    "cdiv",
    "interpreted",
    "jit_unspecialized",
    "launch_head",
    "next_pow2",
    "remember",
]


#: Whether Triton's interpreter runs the kernels (``TRITON_INTERPRET`` set, as it must be,
#: before Triton is imported): read once here for every kernel module. Each module binds
#: it under its own name (``_INTERPRETING``), so a test can plan as on the GPU in one
#: module (``monkeypatch.setattr(red, "_INTERPRETING", False)``) and leave the others.
INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for ``n <= 1``): ``triton.next_power_of_2``
    is a ConstexprFunction wrapper in Triton 3.6 and costs a couple of µs a call on the
    host path."""
    return 1 << max(0, n - 1).bit_length()


#: Entries a per-layout plan cache holds before it empties (every op family keeps one:
#: a repeat call allocates and launches, nothing else).
PLAN_LIMIT = 4096


def remember(cache: dict[Any, Any], key: Any, plan: Any) -> Any:
    """``cache[key] = plan``, emptying a full cache first (:data:`PLAN_LIMIT`); returns
    ``plan``. Callers store a plan only once it was built without raising, so arguments
    that fail a check fail again on the next call."""
    if len(cache) >= PLAN_LIMIT:
        cache.clear()
    cache[key] = plan
    return plan


def jit_unspecialized(fn: Callable[..., Any] | None = None, *, keep: tuple[str, ...] = ()) -> Any:
    """``@triton.jit`` with every integer parameter (annotated ``tl.int64`` or ``tl.int32``)
    in ``do_not_specialize``, read from the signature: one compiled kernel serves every
    size and stride, and a :class:`Launcher` (which keys no integer unless told) can
    never reuse a kernel Triton specialized on another call's values. A hand-written list
    beside a 40-parameter signature misses the parameter added next.

    ``@jit_unspecialized(keep=("S", "sN"))`` leaves those integers to Triton's
    specialization (== 1, divisible by 16: what proves 16-byte vector loads); their
    :class:`Launcher` must then key them (``specialize=`` the same names)."""
    if fn is None:
        return lambda f: jit_unspecialized(f, keep=keep)
    ints = [
        name
        for name, a in fn.__annotations__.items()
        if str(a).rsplit(".", 1)[-1] in ("int64", "int32") and name not in keep
    ]
    return triton.jit(do_not_specialize=ints)(fn)


def interpreted(fn: Any) -> bool:
    """True when ``fn`` was defined under Triton's interpreter (no compiled kernels)."""
    return not hasattr(fn, "device_caches")


def _runtime_knobs() -> Any:
    knobs = getattr(triton, "knobs", None)
    return knobs.runtime if knobs is not None else None


class Launcher:
    """Launches one ``@triton.jit`` function; one instance per function, module-level.

    Call as ``launcher(grid, args, **constexprs)``: ``args`` are the runtime arguments in
    the function's order (tensors, ints, floats), ``constexprs`` the compile-time ones by
    name, always in the same order at a call site (they are part of the cache key).
    """

    def __init__(self, fn: Any, *, specialize: tuple[str, ...] = ()) -> None:
        self.fn = fn
        self._interpreted = interpreted(fn)
        params = [] if self._interpreted else list(fn.params)
        names = [p.name for p in params] or list(getattr(fn, "arg_names", []))
        #: positions of the integer arguments Triton specializes (== 1, divisible by 16)
        self._int_keys = tuple(names.index(n) for n in specialize)
        #: positions of the pointer arguments: the unannotated runtime parameters (every
        #: integer and float parameter of our kernels is annotated), checked on each
        #: compile so the cache key never misses a tensor
        self._ptrs = tuple(
            i for i, p in enumerate(params) if not p.annotation and not p.is_constexpr
        )
        # key -> (compiled kernel, constexpr values in signature order, its run function,
        # the direct launch of :func:`_direct` or None)
        self._compiled: dict[tuple, tuple[Any, tuple[Any, ...], Any, Any]] = {}

    def _key(self, args: Sequence[Any], constexprs: dict[str, Any]) -> tuple:
        """``(cache key, pointer addresses, device index)`` of a compiled launch."""
        key: list[Any] = []
        addresses: list[int] = []
        for i in self._ptrs:
            t = args[i]
            p = t.data_ptr()
            addresses.append(p)
            key.append(t.dtype)
            key.append(p & 15 == 0)
            key.append(t.is_cuda)
        for i in self._int_keys:
            v = args[i]
            key.append(v == 1)
            key.append(v % 16 == 0)
        device = args[self._ptrs[0]].get_device()
        key.append(device)
        key.extend(constexprs.values())
        return tuple(key), addresses, device

    def compiled_for(self, args: Sequence[Any], constexprs: dict[str, Any]) -> tuple | None:
        """``(compiled kernel, its constexpr values in signature order)`` that a launch on
        ``args`` and ``constexprs`` runs, once one has compiled it; None under the
        interpreter or before. What a matmul lane repeats
        (:func:`~opbench.kernels._lib.matmul_lanes.lane_of`)."""
        if self._interpreted:
            return None
        hit = self._compiled.get(self._key(args, constexprs)[0])
        return None if hit is None else (hit[0], hit[1])

    def __call__(self, grid: Sequence[int], args: Sequence[Any], **constexprs: Any) -> None:
        if self._interpreted:
            self.fn[tuple(grid)](*args, **constexprs)
            return
        k, addresses, device = self._key(args, constexprs)
        hit = self._compiled.get(k)
        if hit is None:
            self._compile(k, grid, args, constexprs)
            return
        compiled, consts, run, direct = hit
        n = len(grid)
        enter, exit_ = _hooks()
        stream = self._stream(device)
        if direct is not None and enter is None and exit_ is None:
            # every pointer is a CUDA tensor (``is_cuda`` is in the key): hand the C
            # launcher the addresses read above, so it neither calls ``data_ptr()`` nor
            # asks the driver (``cuPointerGetAttribute``) about each pointer again
            full = list(args)
            for i, p in zip(self._ptrs, addresses):
                full[i] = p
            launch, function, head, packed = direct
            launch(
                grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1, stream, function,
                *head, packed, None, None, None, *full, *consts,
            )  # fmt: skip
            return
        full = (*args, *consts)
        metadata = None
        if enter is not None:
            metadata = compiled.launch_metadata(grid, stream, *full)
        run(
            grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1, stream,
            compiled.function, compiled.packed_metadata, metadata, enter, exit_, *full,
        )  # fmt: skip

    def _compile(
        self, key: tuple, grid: Sequence[int], args: Sequence[Any], constexprs: dict[str, Any]
    ) -> None:
        """A cache miss: check the argument kinds, compile (and launch) through
        ``kernel[grid]``, and keep the compiled kernel under ``key``."""
        for i, p in enumerate(self.fn.params[: len(args)]):
            if isinstance(args[i], torch.Tensor) != (i in self._ptrs):
                raise TypeError(
                    f"{self.fn.__name__}: argument {p.name!r} must "
                    f"{'be' if i in self._ptrs else 'not be'} a tensor (pointer parameters are "
                    "the unannotated ones; annotate integers tl.int64 and floats tl.float64)"
                )
        compiled = self.fn[tuple(grid)](*args, **constexprs)
        # Triton's own query of the current stream (torch's raw stream handle)
        self._stream = triton.runtime.driver.active.get_current_stream
        names = tuple(p.name for p in self.fn.params[len(args) :])
        run = compiled.run
        self._compiled[key] = (
            compiled,
            tuple(constexprs[n] for n in names),
            run,
            _direct(compiled, run),
        )


#: Triton versions whose C launcher takes ``(gridX, gridY, gridZ, stream, function,
#: cooperative, pdl, global_scratch, profile_scratch, packed_metadata, launch_metadata,
#: enter_hook, exit_hook, *kernel_args)``, read from 3.6's ``CudaLauncher.__call__``
#: (``triton/backends/nvidia/driver.py``). 3.9 passes the kernel arguments as one tuple
#: with their annotations; other versions go through ``CompiledKernel.run``.
_DIRECT_VERSIONS = ("3.6.",)


def _direct(compiled: Any, run: Any) -> tuple[Any, Any, tuple[Any, ...], Any] | None:
    """``(launch, function, (cooperative, pdl, None, None), packed_metadata)`` for calling
    Triton's C launcher without ``CudaLauncher.__call__``, or None where that is not the
    same call.

    ``CudaLauncher.__call__`` builds two closures and asks for scratch buffers on every
    launch; for a kernel that needs neither scratch (every kernel here so far) it passes
    None for both, which this path passes too. Kernels that need scratch memory (device
    tensor descriptors, profiling) and Triton versions of another convention keep the
    ordinary path.
    """
    if not triton.__version__.startswith(_DIRECT_VERSIONS):
        return None
    launch = getattr(run, "launch", None)
    head = launch_head(run)
    if launch is None or head is None:
        return None
    return launch, compiled.function, head, compiled.packed_metadata


def launch_head(md: Any) -> tuple[int, int, None, None] | None:
    """``(cooperative, pdl, None, None)``: what Triton 3.6's C launcher takes between the
    function and the packed metadata, read from a compiled kernel's metadata (or its
    ``CudaLauncher``, which carries the same names), for a kernel that needs no scratch
    memory (both buffers passed as None, as ``CudaLauncher.__call__`` passes them); None
    where it needs some. Both direct launches use it: :func:`_direct` (the
    :class:`Launcher`'s, through the module Triton built) and
    :func:`~opbench.kernels._lib.tma_launch.direct_of` (the lanes', built from the kernel's
    own source, descriptors included)."""
    if getattr(md, "global_scratch_size", 1) or getattr(md, "profile_scratch_size", 1):
        return None
    return (int(md.launch_cooperative_grid), int(md.launch_pdl), None, None)


def _hooks() -> tuple[Any, Any]:
    """Triton's launch hooks, or None for each that has nothing to call: Triton 3.6
    passes empty hook chains, and the launcher then calls into Python twice per launch
    for nothing (and builds launch metadata for them)."""
    knobs = _RUNTIME
    if knobs is None:
        return None, None
    enter, exit_ = knobs.launch_enter_hook, knobs.launch_exit_hook
    if enter is not None and not getattr(enter, "calls", True):
        enter = None
    if exit_ is not None and not getattr(exit_, "calls", True):
        exit_ = None
    return enter, exit_


_RUNTIME = _runtime_knobs()
