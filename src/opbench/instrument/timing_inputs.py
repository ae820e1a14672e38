"""The inputs a timed pair runs on: a pristine template, a second draw, and the copies
each timed call gets.

Runs in the WORKER, beside candidate code: it builds and hands out inputs and notes which
draw each call saw; it decides nothing (the harness judges the kept outputs,
:mod:`opbench.judge.timed_output`).

**Why two draws.** With one input set, every timed call of a non-mutating op saw the very
same tensor objects holding the same values. A kernel that remembered its last answer,
keyed on the input objects, their addresses or their version counters, returned it
without computing: correct values, the time of doing nothing. A memoizing ``mul`` was
judged correct at 7.8x eager on the CPU, and on a GPU only cases large enough for the
roofline's memory floor would have caught it (``tests/adversarial``, ``mul.Tensor``).

So each timed call draws, from a generator seeded by the OS, which of two valid draws of
the case its inputs hold: the case's timing seed or a second seed the harness knows
(:func:`opbench.suites.case.timing_seeds`). Non-mutating ops keep one working set of
tensors whose *bytes* are rewritten when the draw changes: same objects, same addresses,
same version counters (the copy goes through a storage alias), so an answer remembered
by identity is the other draw's answer, and wrong. Host-inclusive rounds give every call
its own copy (of a draw chosen per call), so no call sees another's objects. The worker
keeps, with each kept timed output, the draw it saw (:func:`TimingInputs.draw_of`), and
the harness compares it with that draw's reference.

What this cannot stop: a kernel that fingerprints the *values* (all of them, which costs
a full read, or a sample, which a device-side check can do without a host sync) and
keeps one answer per draw. Reading every value costs a memory-bound op what computing
does; compute-bound ops that skip their work this way are caught on a GPU by the
roofline's compute floor (:func:`opbench.judge.roofline.cheat_check`).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import torch

from opbench.spec.trees import map_tensors
from opbench.suites.materialize import tensors_in

__all__ = ["TimingInputs", "clone_inputs", "draw_key", "draw_mismatch", "schema_writes"]

Args = tuple[list[Any], dict[str, Any]]


def clone_inputs(obj: Any, memo: dict[Any, Any] | None = None) -> Any:
    """A layout-exact deep copy of an argument tree (lists, tuples, dicts, tensors).

    Each distinct storage is copied once and every tensor is rebuilt on it with its own
    offset, sizes and strides: stride-0 (expanded) tensors stay expanded, and arguments
    that shared memory still share it. Non-tensor leaves are returned as they are.
    """
    seen: dict[Any, Any] = {} if memo is None else memo
    return map_tensors(obj, lambda t: _clone_tensor(t, seen))


# Like opinfo_samples.clone_tree's tensor step, kept apart: this one copies what the
# timing loop hands a kernel (it keeps requires_grad, declines quantized and meta tensors
# to a plain clone, keys storages by device, pointer and size), that one an OpInfo
# sample's inputs (conjugate and negative views rebuilt, subclasses cloned, requires_grad
# dropped); merging them would change the inputs one of the two judges on.
def _clone_tensor(t: torch.Tensor, memo: dict[Any, Any]) -> torch.Tensor:
    if t.layout != torch.strided or t.is_quantized or t.device.type == "meta":
        return t.clone()
    st = t.untyped_storage()
    key = (t.device, st.data_ptr(), st.nbytes())
    new_st = memo.get(key)
    if new_st is None:
        new_st = st.clone()
        memo[key] = new_st
    out = torch.empty(0, dtype=t.dtype, device=t.device)
    out.set_(new_st, t.storage_offset(), t.shape, t.stride())
    if t.requires_grad:
        out.requires_grad_(True)
    return out


def _storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """A byte tensor over ``t``'s whole storage, with a version counter of its own."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _layout(t: torch.Tensor) -> tuple[Any, ...]:
    return (t.shape, t.stride(), t.storage_offset(), t.dtype, t.device, t.layout)


def _same_inputs(a: Any, b: Any) -> bool:
    """True when two argument trees hold tensors of equal layout and equal bytes."""
    ta, tb = tensors_in(a), tensors_in(b)
    if len(ta) != len(tb):
        return False
    with torch.no_grad():
        for x, y in zip(ta, tb):
            if _layout(x) != _layout(y):
                return False
            if x.layout != torch.strided or y.layout != torch.strided:
                if not torch.equal(x, y):
                    return False
                continue
            if x.untyped_storage().nbytes() != y.untyped_storage().nbytes():
                return False
            if not torch.equal(_storage_bytes(x), _storage_bytes(y)):
                return False
    return True


def schema_writes(fn: Any) -> bool:
    """Whether an OpOverload's schema writes to any argument (``Tensor(a!)``)."""
    schema = getattr(fn, "_schema", None)
    if schema is None:
        return False
    for arg in schema.arguments:
        info = arg.alias_info
        if info is not None and info.is_write:
            return True
    return False


def _skeleton(obj: Any) -> Any:
    """The argument tree with every tensor replaced by its layout: two draws whose
    skeletons are equal can share one set of tensors (same shapes, strides, storages and
    non-tensor arguments; only the bytes differ)."""
    if isinstance(obj, torch.Tensor):
        if obj.layout != torch.strided:
            return ("unswappable", id(obj))
        return ("tensor", _layout(obj), obj.untyped_storage().nbytes())
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(_skeleton(v) for v in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _skeleton(v)) for k, v in obj.items()))
    return ("leaf", repr(obj))


def draw_mismatch(a: Args, b: Args) -> str | None:
    """None when draw ``b`` can be written into tensors laid out like draw ``a``, else
    why not (other shapes, a sparse tensor, another scalar argument)."""
    if _skeleton(a) != _skeleton(b):
        return "the second draw differs in layout or non-tensor arguments"
    if len({s.untyped_storage().data_ptr() for s in tensors_in(a)}) != len(
        {s.untyped_storage().data_ptr() for s in tensors_in(b)}
    ):
        return "the second draw shares storage differently"
    return None


def _write_bytes(dst: Any, src: Any) -> None:
    """``src``'s bytes into ``dst``'s storages, through aliases with their own version
    counters: ``dst``'s tensors keep their objects, addresses and versions."""
    done: set[int] = set()
    with torch.no_grad():
        for d, s in zip(tensors_in(dst), tensors_in(src)):
            ptr = d.untyped_storage().data_ptr()
            if ptr in done:
                continue
            done.add(ptr)
            _storage_bytes(d).copy_(_storage_bytes(s))


def draw_key(args: Any, kwargs: Any) -> int | None:
    """The object a call's draw is recorded under: its first positional argument when
    that is a tensor (a dictionary lookup per call, the common case), else the first
    tensor anywhere in the arguments."""
    if args and isinstance(args[0], torch.Tensor):
        return id(args[0])
    found = tensors_in((args, kwargs))
    return id(found[0]) if found else None


class TimingInputs:
    """The pristine draws, the shared working copy, and fresh copies for writers.

    ``draws[0]`` is the case's timing draw; ``draws[1]``, when given and laid out the
    same, the second draw each call may get instead. ``mutating``: some side writes to
    its inputs, so every call gets its own copy.
    """

    def __init__(
        self,
        template: Args,
        mutating: bool,
        make_alternate: Callable[[], Args] | None = None,
        max_alternate_bytes: int = 1 << 30,
    ) -> None:
        self.draws: list[Args] = [template]
        self.mutating = mutating
        self.nbytes = sum(
            t.untyped_storage().nbytes()
            if t.layout == torch.strided
            else t.numel() * t.element_size()
            for t in tensors_in(template)
        )
        alternate, self.note = self._second_draw(make_alternate, max_alternate_bytes)
        if alternate is not None:
            self.draws.append(alternate)
        self._rng = random.Random(os.urandom(16))
        #: draw_key(args) -> which draw those arguments hold, for every set handed out
        self._draw_by_key: dict[int, int] = {}
        self.current = 0
        self.working = self._tagged(clone_inputs(template), 0)
        #: which part of the protocol the calls belong to ("device": the calls timed by
        #: CUDA events or the CPU's device clock, "host": the host-inclusive rounds,
        #: "other"), for the wrapper that keeps timed outputs (instrument/timed.py)
        self.phase = "other"

    @property
    def template(self) -> Args:
        return self.draws[0]

    def _second_draw(
        self, make_alternate: Callable[[], Args] | None, max_bytes: int
    ) -> tuple[Args | None, str | None]:
        """The second draw, or None and why not: none asked for; inputs too large to keep
        a second copy of (above ``max_bytes`` the roofline's memory floor already rules
        out a call that skips its reads); it could not be built; or it cannot share the
        first draw's tensors (:func:`draw_mismatch`)."""
        if make_alternate is None:
            return None, None
        if self.nbytes > max_bytes:
            return None, f"inputs of {self.nbytes} bytes are over {max_bytes}: one draw"
        try:
            args, kwargs = make_alternate()
        except Exception as e:  # noqa: BLE001 - a case whose second draw cannot be made
            return None, f"no second draw ({type(e).__name__}: {str(e)[:200]}): one draw"
        alternate = (list(args), dict(kwargs))
        why = draw_mismatch(self.template, alternate)
        return (None, why) if why else (alternate, None)

    def _tagged(self, args: Args, k: int) -> Args:
        key = draw_key(args[0], args[1])
        if key is not None:
            self._draw_by_key[key] = k
        return args

    def _pick(self) -> int:
        return self._rng.randrange(len(self.draws)) if len(self.draws) > 1 else 0

    def draw_of(self, args: Any, kwargs: Any) -> int:
        """Which draw the arguments of the call just made held (0 when unknown)."""
        return self._draw_by_key.get(draw_key(args, kwargs), 0)  # type: ignore[arg-type]

    def fresh(self, k: int = 0) -> Args:
        """A new copy of draw ``k``."""
        return self._tagged(clone_inputs(self.draws[k]), k)

    def for_rep(self) -> Args:
        """The arguments of one timed repetition, of a draw chosen at random."""
        return self.holding(self._pick())

    def holding(self, k: int) -> Args:
        """Arguments holding draw ``k``: the working tensors (rewritten if they held the
        other draw), or for writers a fresh copy."""
        if self.mutating:
            return self.fresh(k)
        if k != self.current:
            _write_bytes(self.working, self.draws[k])
            self.current = k
            self._tagged(self.working, k)
        return self.working

    def pool(self, calls: int) -> list[Args]:
        """``calls`` copies for back-to-back calls, each of a draw chosen at random."""
        self._draw_by_key.clear()
        self._tagged(self.working, self.current)
        return [self.fresh(self._pick()) for _ in range(calls)]

    def became_dirty(self) -> bool:
        """The shared copy changed: some side writes to its inputs."""
        return not _same_inputs(self.working, self.draws[self.current])

    def reset(self) -> None:
        self.working = self._tagged(clone_inputs(self.draws[self.current]), self.current)
