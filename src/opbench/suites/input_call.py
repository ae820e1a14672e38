"""The call being built and how its values are drawn: what the builder and the rules share.

Owns :class:`NotRunnable` (valid inputs cannot be made), the value kinds (:class:`Kind`
and its constants), :class:`Call` (the parsed call bound to the overload's schema, which
the operator rules read and annotate), the seeded draws (:func:`draw`, :func:`draw_seeded`, :func:`mix_seed`)
and the small argument helpers the rules use. The builder is
:mod:`opbench.suites.inputs`; the rules are :mod:`opbench.suites.input_rules` and
:mod:`opbench.suites.input_index_rules`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from opbench.spec.args import ParsedArgs, TensorSpec
from opbench.suites import draw_pool

__all__ = [
    "DEFAULT",
    "DISCRETE",
    "NONZERO",
    "POSITIVE",
    "PROB",
    "SPECIAL",
    "UNIT",
    "Call",
    "Kind",
    "NotRunnable",
    "Path",
    "draw",
    "draw_seeded",
    "has_overlap",
    "index_kind",
    "int_arg",
    "mix_seed",
    "norm_dim",
    "not_runnable",
    "size_along",
]


class NotRunnable(Exception):
    """Valid inputs for this case cannot be generated; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


# --------------------------------------------------------------------------- value kinds


@dataclass(frozen=True)
class Kind:
    """How to draw the values of one tensor.

    ``name`` is one of: ``default`` (both signs, magnitudes 2**-2..2**2 times a normal),
    ``positive`` (2**uniform(-4, 4)), ``unit`` (uniform in (-scale, scale)), ``prob``
    (uniform in (0, 1)), ``index`` (integers in [lo, hi)), ``nonzero`` (no zeros),
    ``special`` (default with NaN/+inf/-inf sprinkled in), ``discrete`` (small whole
    numbers, so equality tests hit), ``bounded`` (default clamped to +-scale).
    """

    name: str = "default"
    lo: int = 0
    hi: int = 0
    scale: float = 1.0


DEFAULT = Kind()
POSITIVE = Kind("positive")
PROB = Kind("prob")
UNIT = Kind("unit")
NONZERO = Kind("nonzero")
SPECIAL = Kind("special")
DISCRETE = Kind("discrete")


def index_kind(hi: int, lo: int = 0) -> Kind:
    return Kind("index", lo=lo, hi=hi)


# --------------------------------------------------------------------------- binding


Path = tuple  # ("args", 1) / ("args", 1, 0) / ("kwargs", "out")


@dataclass
class Call:
    """The parsed call bound to the overload's schema, plus what the rules decided."""

    op: str
    parsed: ParsedArgs
    schema_names: list[str]
    kinds: dict[Path, Kind] = field(default_factory=dict)
    derives: list[Callable[[Call], None]] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)  # built args (filled later)
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    meta: bool = False
    seed: int = 0

    # -- looking arguments up by schema name ------------------------------------
    def path(self, name: str) -> Path | None:
        if name in self.parsed.kwargs:
            return ("kwargs", name)
        if name in self.schema_names:
            i = self.schema_names.index(name)
            if i < len(self.parsed.args):
                return ("args", i)
        return None

    def spec(self, name: str) -> Any:
        """The parsed (description) value of argument ``name`` (None when absent)."""
        p = self.path(name)
        if p is None:
            return None
        return self.parsed.kwargs[p[1]] if p[0] == "kwargs" else self.parsed.args[p[1]]

    def value(self, name: str) -> Any:
        """The built value of argument ``name`` (after generation)."""
        p = self.path(name)
        if p is None:
            return None
        return self.kwargs[p[1]] if p[0] == "kwargs" else self.args[p[1]]

    def set_kind(self, name: str, kind: Kind, *sub: int) -> None:
        p = self.path(name)
        if p is not None:
            self.kinds[p + tuple(sub)] = kind

    def tensor_spec(self, name: str, required: bool = True) -> TensorSpec | None:
        s = self.spec(name)
        if isinstance(s, TensorSpec):
            return s
        if required:
            raise NotRunnable(f"{self.op}: argument {name!r} is not a tensor")
        return None

    def replace(self, name: str, dense: torch.Tensor, *sub: int) -> None:
        """Write derived values into argument ``name`` keeping its layout."""
        p = self.path(name)
        assert p is not None
        target = self.value(name)
        for i in sub:
            target = target[i]
        _assign(target, dense, f"{self.op} argument {name!r}")


# --------------------------------------------------------------------------- drawing values


def mix_seed(seed: int, path: Path) -> int:
    """A stable 63-bit seed for one tensor (Python's ``hash`` is salted per process)."""
    digest = hashlib.sha256(f"{seed}|{path!r}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


_COMPLEX_PARTS = {
    torch.complex32: torch.float16,
    torch.complex64: torch.float32,
    torch.complex128: torch.float64,
}


def draw(n: int, dtype: torch.dtype, kind: Kind, g: torch.Generator) -> torch.Tensor:
    """``n`` values of ``dtype`` drawn on the CPU according to ``kind``."""
    if dtype == torch.bool:
        return torch.rand(n, generator=g) < 0.5
    if dtype in _COMPLEX_PARTS:
        part = _COMPLEX_PARTS[dtype]
        re = _draw_float(n, torch.float64 if part == torch.float64 else torch.float32, kind, g)
        im = _draw_float(n, torch.float64 if part == torch.float64 else torch.float32, kind, g)
        return torch.stack([re, im], -1).to(part).view(dtype).reshape(n)
    if dtype.is_floating_point:
        work = torch.float64 if dtype == torch.float64 else torch.float32
        return _draw_float(n, work, kind, g, target=dtype).to(dtype)
    return _draw_int(n, dtype, kind, g)


#: Elements one generator draws: a larger tensor is drawn in chunks of this many, each
#: from its own seed (:func:`draw_seeded`). No larger than PyTorch's intra-op grain, so
#: every op of a chunk's draw runs whole on the calling thread.
DRAW_CHUNK = 1 << 15


def draw_seeded(n: int, dtype: torch.dtype, kind: Kind, seed: int) -> torch.Tensor:
    """:func:`draw` from ``seed``: one generator up to :data:`DRAW_CHUNK` elements, else
    one generator a chunk, seeded from ``seed`` and the chunk's index.

    The traces' activations run to 10^8 elements, and drawing them was over half of the
    harness's planning on a 4-GPU run (2026-11-27, py-spy): chunks that fit the CPU's
    caches draw 50M float16 values in 0.37 s where one generator takes 0.56 s (2-core
    CPU). The values depend on the chunking alone, so the harness and every worker agree,
    and the chunks of a tensor of more than :data:`POOLED_CHUNKS` are drawn on the
    process's draw threads (:mod:`opbench.suites.draw_pool`; a worker starts them before
    its judge's census of threads)."""
    if n <= DRAW_CHUNK:
        return draw(n, dtype, kind, torch.Generator().manual_seed(seed))

    def chunk(i: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(mix_seed(seed, ("chunk", i)))
        return draw(min(DRAW_CHUNK, n - i * DRAW_CHUNK), dtype, kind, g)

    chunks = range((n + DRAW_CHUNK - 1) // DRAW_CHUNK)
    if len(chunks) <= POOLED_CHUNKS:
        return torch.cat([chunk(i) for i in chunks])
    return torch.cat(draw_pool.map_chunks(chunk, chunks))


#: Chunks up to which a tensor is drawn on the calling thread (handing a chunk to the
#: pool costs tens of microseconds; drawing one, hundreds).
POOLED_CHUNKS = 4


#: PyTorch's intra-op grain: a pointwise op on more elements is cut into one chunk per
#: thread. See :func:`_exp2`.
_GRAIN = 32768


def _exp2(x: torch.Tensor) -> torch.Tensor:
    """``torch.exp2`` that gives the same bits whatever the thread count.

    A vectorised ``exp2`` ends every chunk with a scalar tail, and the two paths differ
    in the last bit for some inputs; past the grain the chunks follow the thread count,
    so a harness and a worker with different counts drew different inputs (Ray's actors
    run with one thread: aten's own ``minimum.default`` was judged ``mutates_input``).
    Slices no larger than the grain run whole on the calling thread, tail included, at
    the same places for every thread count."""
    if x.numel() <= _GRAIN:
        return torch.exp2(x)
    out = torch.empty_like(x)
    for src, dst in zip(x.split(_GRAIN), out.split(_GRAIN)):
        torch.exp2(src, out=dst)
    return out


def _draw_float(
    n: int, work: torch.dtype, kind: Kind, g: torch.Generator, target: torch.dtype | None = None
) -> torch.Tensor:
    # in place: the same bits as ``rand * (hi - lo) + lo``, without two more tensors of
    # the input's size (inputs of traced models run to 10^8 elements)
    def uniform(lo: float, hi: float) -> torch.Tensor:
        return torch.rand(n, generator=g, dtype=work).mul_(hi - lo).add_(lo)

    def default() -> torch.Tensor:
        return torch.randn(n, generator=g, dtype=work).mul_(_exp2(uniform(-2.0, 2.0)))

    k = kind.name
    if k == "default":
        return default()
    if k == "positive":
        return _exp2(uniform(-4.0, 4.0))
    if k == "unit":
        return uniform(-1.0, 1.0) * kind.scale
    if k == "prob":
        return uniform(0.02, 0.98)
    if k == "bounded":
        return default().clamp(-kind.scale, kind.scale)
    if k == "nonzero":
        x = default()
        return torch.where(x.abs() < 0.0625, torch.full_like(x, 0.5), x)
    if k == "discrete":
        return torch.round(default())
    if k == "index":
        return torch.randint(kind.lo, kind.hi, (n,), generator=g).to(work)
    if k == "special":
        x = default()
        pick = torch.rand(n, generator=g)
        specials = torch.tensor([math.nan, math.inf, -math.inf], dtype=work)
        which = torch.randint(0, 3, (n,), generator=g)
        return torch.where(pick < 0.125, specials[which], x)
    raise ValueError(f"unknown value kind {k!r}")


def _draw_int(n: int, dtype: torch.dtype, kind: Kind, g: torch.Generator) -> torch.Tensor:
    info = torch.iinfo(dtype)
    k = kind.name
    if k == "index":
        if kind.hi <= kind.lo:
            if n == 0:
                return torch.empty(0, dtype=dtype)
            raise NotRunnable(f"no valid index in [{kind.lo}, {kind.hi})")
        return torch.randint(kind.lo, kind.hi, (n,), generator=g).to(dtype)
    if k in ("positive", "prob"):
        lo, hi = 1, 9
    elif info.min == 0:
        lo, hi = 0, 17
    else:
        lo, hi = -8, 9
    x = torch.randint(lo, hi, (n,), generator=g)
    if k == "nonzero":
        x = torch.where(x == 0, torch.ones_like(x), x)
    return x.to(dtype)


def has_overlap(t: torch.Tensor) -> bool:
    return any(s == 0 and n > 1 for n, s in zip(t.shape, t.stride())) or (
        t.numel() > 1 and torch._debug_has_internal_overlap(t) != 0
    )


def _assign(target: Any, dense: torch.Tensor, what: str) -> None:
    if not isinstance(target, torch.Tensor):
        raise NotRunnable(f"{what} is not a tensor")
    if tuple(target.shape) != tuple(dense.shape):
        if target.numel() == dense.numel():
            dense = dense.reshape(target.shape)
        else:
            raise NotRunnable(
                f"{what}: derived shape {tuple(dense.shape)} does not match {tuple(target.shape)}"
            )
    if has_overlap(target):
        raise NotRunnable(f"{what} has an expanded (overlapping) layout but needs derived values")
    with torch.no_grad():
        target.copy_(dense.to(target.dtype))


# --------------------------------------------------------------------------- argument helpers


def norm_dim(d: int, ndim: int) -> int:
    return d + max(ndim, 1) if d < 0 else d


def size_along(spec: TensorSpec, dim: int) -> int:
    if len(spec.shape) == 0:
        return 1
    return spec.shape[norm_dim(dim, len(spec.shape))]


def int_arg(call: Call, name: str, default: int | None = None) -> int:
    v = call.spec(name)
    if v is None:
        if default is None:
            raise NotRunnable(f"{call.op}: argument {name!r} is missing")
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise NotRunnable(f"{call.op}: argument {name!r} is not an int")
    return v


def not_runnable(reason: str) -> Callable[[Call], None]:
    def rule(call: Call) -> None:
        raise NotRunnable(reason)

    return rule
