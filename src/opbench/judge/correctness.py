"""The correctness rule: is a candidate's output as accurate as PyTorch's own?

A candidate output ``c`` is compared against ``r``, the op computed in float64 on
upcast inputs (f16/bf16/f32 -> f64, complex -> complex128, integers unchanged), and
against ``e``, eager PyTorch's output on the original inputs. The error that PyTorch
itself makes, ``|e - r|``, is the yardstick: PyTorch would merge a kernel that is
about as accurate as the one it already has.

Floating point (complex compared as real and imaginary parts), elementwise::

    |c - r| <= K * |e - r| + atol(dtype) * atol_scale + rtol(dtype) * rtol_scale * |r|

The floors are :func:`torch.testing.assert_close`'s defaults for the output dtype, the
tolerances PyTorch's own test-suite accepts between two correct implementations; they
cover the case where eager happens to be exact at an element and a correctly rounded
candidate is one ulp away (1 ulp < rtol for every dtype: f32 eps 1.2e-7 < 1.3e-6, f16
eps 9.8e-4 ~ 1e-3, bf16 eps 7.8e-3 < 1.6e-2).

``K = 3`` (:data:`K`): a kernel whose error is within a few times PyTorch's is as good
as PyTorch within the noise of rounding (a different but equally careful summation
order has the same error distribution, and its worst element over many elements
exceeds eager's by up to ~2x); a kernel that computes in a lower precision
(f16 accumulation, TF32) is off by 2**10 times or more and fails.

Reductions and contractions (:func:`uses_norm_fallback`: sums, matmuls, convolutions,
norms, scans, and any op whose output is smaller than an input) accumulate rounding
in an order the candidate is free to choose, so elementwise errors are noisy: where
eager happens to be exact at one element, a different order is not. When the
elementwise test fails for such an op, the candidate still passes if, over all finite
elements, both of these hold::

    ||c - r||_2   <= K * ||e - r||_2   + atol * sqrt(n) + rtol * ||r||_2
    max |c - r|   <= K * max |e - r|   + atol + rtol * max |r|

(the second keeps one far-off element from hiding inside the norm).

Integers and bools must equal eager exactly. NaN positions must agree with eager, and
so must +-Inf positions and signs (eager overflowing where the float64 value sits at the
edge of the dtype's range, ``|r| >= finfo.max * (1 - rtol)``, is tolerated). Shapes,
dtypes and devices must match eager (``wrong_meta``); strides are reported here and
enforced by the caller only where the op's contract fixes them (in-place and ``out=``).

Where no float64 reference can be computed (the op rejects float64 inputs, say), the
eager output is the reference and only the floors apply (``|e - r| = 0``), which is
``assert_close`` against PyTorch.

This module owns whole output structures (:func:`compare_outputs`, :func:`bitwise_equal`,
:func:`leaves`) and weak tests (:func:`trivial_answers`: would a trivial answer pass?).
One tensor is compared by :func:`opbench.judge.tensor_compare.compare_tensor`; the numbers
are :mod:`opbench.judge.tolerances`'s. Both modules' public names are re-exported here.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from opbench.instrument import tensors
from opbench.judge.tensor_compare import Comparison, as_real, compare_tensor, output_name
from opbench.judge.tolerances import (
    TOLERANCES,
    K,
    Tolerance,
    tolerance_for,
    uses_norm_fallback,
)

__all__ = [
    "K",
    "TOLERANCES",
    "Tolerance",
    "Comparison",
    "tolerance_for",
    "compare_outputs",
    "devices_from_meta",
    "compare_tensor",
    "uses_norm_fallback",
    "leaves",
    "bitwise_equal",
    "trivial_answers",
]


# --------------------------------------------------------------------------- structure


def leaves(obj: Any, path: str = "") -> list[tuple[str, Any]]:
    """Flatten tuples/lists of outputs into ``[(path, leaf)]`` (path like ``[1][0]``)."""
    if isinstance(obj, (tuple, list)):
        out: list[tuple[str, Any]] = []
        for i, v in enumerate(obj):
            out.extend(leaves(v, f"{path}[{i}]"))
        return out
    return [(path, obj)]


def _structure(obj: Any) -> Any:
    if isinstance(obj, (tuple, list)):
        return ("seq", len(obj), tuple(_structure(v) for v in obj))
    if isinstance(obj, torch.Tensor):
        return "tensor"
    if obj is None:
        return "none"
    return "scalar"


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The bytes of ``t``'s elements; a fresh copy, since ``contiguous()`` can keep the
    odd stride of a one-element tensor, which ``view(torch.uint8)`` refuses."""
    return tensors.byte_view(t)


def bitwise_equal(a: Any, b: Any) -> bool:
    """Exact equality of two output structures, NaN == NaN, -0.0 != 0.0."""
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        if not isinstance(a, (tuple, list)) or not isinstance(b, (tuple, list)):
            return False
        return len(a) == len(b) and all(bitwise_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.numel() == 0:
            return True
        if a.layout != torch.strided or b.layout != torch.strided:
            try:
                return bool(torch.equal(a.cpu().to_dense(), b.cpu().to_dense()))
            except (RuntimeError, NotImplementedError):
                return False
        return bool(torch.equal(_bits(a.cpu()), _bits(b.cpu())))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


# --------------------------------------------------------------------------- output structures


def _scalar_tensor(x: Any) -> torch.Tensor | None:
    if isinstance(x, bool):
        return torch.tensor(x)
    if isinstance(x, int):
        return torch.tensor(x, dtype=torch.int64)
    if isinstance(x, float):
        return torch.tensor(x, dtype=torch.float64)
    if isinstance(x, complex):
        return torch.tensor(x, dtype=torch.complex128)
    return None


def devices_from_meta(meta: list[dict[str, Any]]) -> dict[str, str]:
    """Output path -> the device a tensor output came from, from the output records
    workers send (:func:`opbench.instrument.tensors.output_meta`): what
    :func:`compare_outputs` takes as ``cand_devices``/``eager_devices``."""
    return {m["path"]: m.get("device", "") for m in meta if m.get("kind") == "tensor"}


def compare_outputs(
    cand: Any,
    eager: Any,
    ref: Any,
    *,
    op: str = "",
    rtol_scale: float = 1.0,
    atol_scale: float = 1.0,
    cand_devices: dict[str, str] | None = None,
    eager_devices: dict[str, str] | None = None,
    max_in_numel: int = 0,
    norm_fallback: bool | None = None,
    meta_only: frozenset[str] | set[str] | bool = False,
    work_device: str | None = None,
) -> Comparison:
    """Compare output structures (tensors, tuples/lists, Python scalars, None).

    ``ref`` is the float64 reference with the same structure, or None. Returns the first
    failing leaf's :class:`Comparison`, or a passing one carrying the worst errors.
    ``meta_only``: output paths (``"[1]"``; ``""`` for a single output) whose values are
    undefined (uninitialised memory), or True for all: only shape, dtype and device count.
    ``cand_devices``/``eager_devices`` map output paths to the devices the tensors came
    from, when they were copied to the CPU for comparing (a factory op such as
    ``arange`` without a ``device`` argument returns a CPU tensor in a CUDA run).
    ``work_device``: where tensors are compared (see :func:`compare_tensor`); a leaf that
    does not fit in that device's memory is compared on the CPU.
    """
    if _structure(cand) != _structure(eager):
        # a Python scalar where eager returns a 0-dim tensor (or the reverse) is still wrong
        return Comparison(
            "wrong_meta",
            f"output structure {_describe(cand)} differs from eager's {_describe(eager)}",
        )
    c_leaves = leaves(cand)
    e_leaves = leaves(eager)
    r_leaves = leaves(ref) if ref is not None and _structure(ref) == _structure(eager) else None
    worst_abs: float | None = None
    worst_rel: float | None = None
    all_details: dict[str, Any] = {}
    for i, ((path, c), (_, e)) in enumerate(zip(c_leaves, e_leaves)):
        r = r_leaves[i][1] if r_leaves is not None else None
        if e is None:
            continue
        if not isinstance(e, torch.Tensor):
            ct, et = _scalar_tensor(c), _scalar_tensor(e)
            rt = _scalar_tensor(r) if r is not None else None
            if ct is None or et is None:
                if c != e:
                    return Comparison(
                        "wrong_result", f"{output_name(path)}: got {c!r}, expected {e!r}"
                    )
                continue
            if type(c) is not type(e):
                return Comparison(
                    "wrong_meta",
                    f"{output_name(path)}: Python {type(c).__name__}, expected {type(e).__name__}",
                )
            res = compare_tensor(
                ct, et, rt, op=op, path=path, rtol_scale=rtol_scale, atol_scale=atol_scale
            )
        else:
            rt = r if isinstance(r, torch.Tensor) else None
            leaf = functools.partial(
                compare_tensor,
                c,
                e,
                rt,
                op=op,
                path=path,
                rtol_scale=rtol_scale,
                atol_scale=atol_scale,
                cand_device=(cand_devices or {}).get(path),
                eager_device=(eager_devices or {}).get(path),
                max_in_numel=max_in_numel,
                norm_fallback=norm_fallback,
                values=not (meta_only is True or (meta_only and path in meta_only)),
            )
            try:
                res = leaf(work_device=work_device)
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
                res = leaf(work_device=None)
        if not res.ok:
            return res
        if res.details:
            all_details[output_name(path)] = res.details
        if res.max_abs_err is not None:
            worst_abs = max(worst_abs or 0.0, res.max_abs_err)
        if res.max_rel_err is not None:
            worst_rel = max(worst_rel or 0.0, res.max_rel_err)
    return Comparison(max_abs_err=worst_abs, max_rel_err=worst_rel, details=all_details)


def _describe(obj: Any) -> str:
    if isinstance(obj, (tuple, list)):
        inner = ", ".join(_describe(v) for v in obj)
        return f"({inner})" if isinstance(obj, tuple) else f"[{inner}]"
    if isinstance(obj, torch.Tensor):
        return "Tensor"
    return type(obj).__name__


# --------------------------------------------------------------------------- weak tests


def _finite_mean(e: torch.Tensor) -> float:
    """The mean of ``e``'s finite values (0 when none), in float64, without the boolean
    indexing that copies them out (seconds on a large output on one CPU thread)."""
    src = as_real(e).to(torch.float64) if e.dtype.is_complex else e.to(torch.float64)
    finite = torch.isfinite(src)
    count = int(finite.sum())
    return float(torch.where(finite, src, 0.0).sum()) / count if count else 0.0


def _trivial_like(
    e: Any,
    kind: str,
    first_input: torch.Tensor | None,
    picks: dict[str, torch.Tensor] | None = None,
    path: str = "",
) -> Any:
    """The trivial answer ``kind`` shaped like ``e``; with ``picks``, a leaf that has
    picks holds the answer's values at those flat positions only (1-D, as :func:`_sample`
    gives them), so a large answer is never built just to fail on its sample."""
    if isinstance(e, (tuple, list)):
        seq = [_trivial_like(v, kind, first_input, picks, f"{path}[{i}]") for i, v in enumerate(e)]
        return seq if isinstance(e, list) else tuple(seq)
    if not isinstance(e, torch.Tensor):
        return e
    e = e.detach().cpu()
    at = None if picks is None else picks.get(path)
    like = e if at is None else torch.empty(at.numel(), dtype=e.dtype)
    if kind == "zeros":
        return torch.zeros_like(like)
    if kind == "constant":
        if e.numel() == 0:
            return torch.zeros_like(like)
        if e.dtype == torch.bool:
            # the majority value
            return torch.full_like(like, bool(e.sum() * 2 >= e.numel()))
        m = _finite_mean(e)
        if not (e.dtype.is_floating_point or e.dtype.is_complex):
            m = round(m)
        return torch.full_like(like, m)
    if kind == "input_copy":
        if first_input is None or tuple(first_input.shape) != tuple(e.shape):
            return None
        try:
            if at is not None:
                return first_input.detach().reshape(-1)[at.to(first_input.device)].cpu().to(e.dtype)
            return first_input.detach().cpu().to(e.dtype).clone()
        except (RuntimeError, TypeError):
            return None
    raise ValueError(kind)


def _usable(answer: Any, eager: Any) -> bool:
    """Whether a trivial answer could be built for every output eager gave."""
    return answer is not None and not (
        any(v is None for _, v in leaves(answer)) and not any(v is None for _, v in leaves(eager))
    )


def trivial_answers(
    eager: Any,
    ref: Any,
    first_input: torch.Tensor | None,
    *,
    allow_input_copy: bool = True,
    allow_constant: bool = True,
    **compare_kwargs: Any,
) -> list[str]:
    """Which trivial answers (``zeros``, ``constant`` (the mean), ``input_copy``) would pass.

    A non-empty result means the test cannot tell a right kernel from a lazy one.
    ``constant`` is the mean of the reference for each output, a stand-in for "any
    constant the kernel could guess"; it is tried only where some output has two or
    more elements (a one-element answer equal to its own mean says nothing).
    ``allow_input_copy=False`` for ops whose answer *is* a copy of the input by
    definition (``clone``, ``_to_copy``, views), where that answer is not lazy;
    ``allow_constant=False`` likewise for ops whose answer is a constant (``zeros``,
    ``fill_``): then zeros and the constant are not tried.
    """
    passing = []
    base = ref if ref is not None else eager
    total = sum(v.numel() for _, v in leaves(eager) if isinstance(v, torch.Tensor))
    sampled = total > SAMPLE_ABOVE
    if sampled and compare_kwargs.get("norm_fallback") is None:
        # decided on the full size, not on the sample's
        compare_kwargs["norm_fallback"] = uses_norm_fallback(
            compare_kwargs.get("op", ""), total, compare_kwargs.get("max_in_numel", 0)
        )
    kinds = ["zeros"] if allow_constant else []
    if allow_constant and any(
        isinstance(v, torch.Tensor) and v.numel() >= 2 for _, v in leaves(eager)
    ):
        kinds.append("constant")
    if allow_input_copy:
        kinds.append("input_copy")
    picks = _sample_picks(eager) if sampled else None
    if picks is not None:
        eager_sample, ref_sample = _sample(eager, picks), _sample(ref, picks)
    for kind in kinds:
        source = base if kind == "constant" else eager
        if picks is not None:
            # Most trivial answers fail somewhere in any sample; only a sample that passes
            # is worth the full comparison (seconds per large output on a small CPU).
            sample = _answer(source, kind, first_input, eager, picks)
            if (
                sample is None
                or not compare_outputs(sample, eager_sample, ref_sample, **compare_kwargs).ok
            ):
                continue
        answer = _answer(source, kind, first_input, eager)
        if answer is not None and compare_outputs(answer, eager, ref, **compare_kwargs).ok:
            passing.append(kind)
    return passing


def _answer(
    source: Any,
    kind: str,
    first_input: torch.Tensor | None,
    eager: Any,
    picks: dict[str, torch.Tensor] | None = None,
) -> Any:
    """The trivial answer ``kind`` built from ``source`` (at ``picks`` only, when given)
    in eager's dtypes, or None when it cannot be built for every output eager gave."""
    try:
        answer = _trivial_like(source, kind, first_input, picks)
    except (RuntimeError, TypeError, ValueError):
        return None
    if not _usable(answer, eager):
        return None
    return _cast_like(answer, eager) if kind == "constant" else answer


#: Outputs with more elements than this are first checked for weakness on a sample.
SAMPLE_ABOVE = 1 << 20
_SAMPLE_SIZE = 1 << 16


def _sample_picks(eager: Any) -> dict[str, torch.Tensor]:
    """Fixed pseudo-random flat positions per output leaf (the same for every answer)."""
    g = torch.Generator().manual_seed(0)
    picks = {}
    for path, v in leaves(eager):
        if isinstance(v, torch.Tensor) and v.numel() > _SAMPLE_SIZE:
            picks[path] = torch.randint(0, v.numel(), (_SAMPLE_SIZE,), generator=g)
    return picks


def _sample(obj: Any, picks: dict[str, torch.Tensor], path: str = "") -> Any:
    """``obj`` with each large tensor leaf replaced by its values at ``picks`` (1-D)."""
    if obj is None:
        return None
    if isinstance(obj, (tuple, list)):
        seq = [_sample(v, picks, f"{path}[{i}]") for i, v in enumerate(obj)]
        return seq if isinstance(obj, list) else tuple(seq)
    if isinstance(obj, torch.Tensor) and path in picks:
        return obj.detach().reshape(-1)[picks[path].to(obj.device)]
    return obj


def _cast_like(answer: Any, eager: Any) -> Any:
    if isinstance(answer, (tuple, list)):
        seq = [_cast_like(a, e) for a, e in zip(answer, eager)]
        return seq if isinstance(answer, list) else tuple(seq)
    if isinstance(answer, torch.Tensor) and isinstance(eager, torch.Tensor):
        return answer.to(eager.dtype)
    return answer
