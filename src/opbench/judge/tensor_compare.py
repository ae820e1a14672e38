"""One candidate tensor against eager's and the float64 reference: the elementwise rule.

Owns :class:`Comparison` (the outcome: a failure category and message, or the worst
errors of a pass) and :func:`compare_tensor`: shape, dtype and device first
(``wrong_meta``), exact equality for integers and bools, NaN and +-Inf positions against
eager (``nan_mismatch``, with eager's own non-finite errors excused), then
``|c - r| <= K |e - r| + atol + rtol |r|`` elementwise and, for accumulating operators,
the norm test. The rule and its reasons are set out in :mod:`opbench.judge.correctness`,
which compares whole output structures with it; the numbers are
:mod:`opbench.judge.tolerances`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from opbench.judge.tolerances import (
    EAGER_UNRELIABLE_FACTOR,
    EAGER_UNRELIABLE_MIN,
    K,
    tolerance_for,
    uses_norm_fallback,
)

__all__ = ["Comparison", "as_real", "compare_tensor", "output_name"]


@dataclass
class Comparison:
    """The outcome of comparing one output structure; ``category`` None means it passed."""

    category: str | None = None
    message: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.category is None


def _fmt_index(flat: int, shape: tuple[int, ...]) -> str:
    if not shape:
        return "[]"
    idx = []
    for s in reversed(shape):
        idx.append(flat % s if s else 0)
        flat //= s if s else 1
    return "[" + ", ".join(str(i) for i in reversed(idx)) + "]"


def output_name(path: str) -> str:
    return f"output{path}" if path else "output"


def as_real(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().resolve_conj().resolve_neg()
    if t.is_complex():
        return torch.view_as_real(
            t.contiguous() if t.dtype != torch.complex32 else t.to(torch.complex64)
        )
    return t


def compare_tensor(
    cand: torch.Tensor,
    eager: torch.Tensor,
    ref: torch.Tensor | None,
    *,
    op: str = "",
    path: str = "",
    rtol_scale: float = 1.0,
    atol_scale: float = 1.0,
    check_device: bool = True,
    cand_device: str | None = None,
    eager_device: str | None = None,
    norm_fallback: bool | None = None,
    max_in_numel: int = 0,
    values: bool = True,
    work_device: str | None = None,
) -> Comparison:
    """Compare one candidate tensor with eager's and the float64 reference (see module doc).

    ``cand`` and ``eager`` may live on different devices (the candidate's is usually
    copied to the CPU); pass their original devices in ``cand_device``/``eager_device``.
    ``work_device``: where the arithmetic runs (default the CPU); a program's outputs of
    a GiB each took most of a problem's minute on the CPU, a fraction of a second on a GPU.
    """
    where = output_name(path)
    cdev = cand_device or str(cand.device)
    edev = eager_device or str(eager.device)
    if tuple(cand.shape) != tuple(eager.shape):
        return Comparison(
            "wrong_meta", f"{where}: shape {list(cand.shape)}, expected {list(eager.shape)}"
        )
    if cand.dtype != eager.dtype:
        return Comparison(
            "wrong_meta",
            f"{where}: dtype {str(cand.dtype).removeprefix('torch.')}, expected "
            f"{str(eager.dtype).removeprefix('torch.')}",
        )
    if check_device and torch.device(cdev).type != torch.device(edev).type:
        return Comparison("wrong_meta", f"{where}: device {cdev}, expected {edev}")
    details: dict[str, Any] = {}
    if cand.numel() == 0 or not values:
        return Comparison(details=details)
    dev = work_device or "cpu"
    c = cand.detach().to(dev)
    e = eager.detach().to(dev)
    dtype = eager.dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        if torch.equal(c, e):
            return Comparison(max_abs_err=0.0, max_rel_err=0.0)
        diff = c != e
        n_bad = int(diff.sum())
        first = int(diff.reshape(-1).nonzero()[0])
        cv = c.reshape(-1)[first].item()
        ev = e.reshape(-1)[first].item()
        err = None
        if dtype != torch.bool:
            err = float((c.to(torch.float64) - e.to(torch.float64)).abs().max())
        return Comparison(
            "wrong_result",
            f"{where}: {n_bad} of {c.numel()} elements differ (exact match required for "
            f"{str(dtype).removeprefix('torch.')}); at {_fmt_index(first, tuple(c.shape))} "
            f"got {cv}, expected {ev}",
            max_abs_err=err,
        )
    tol = tolerance_for(dtype)
    atol = tol.atol * atol_scale
    rtol = tol.rtol * rtol_scale
    # 16-bit outputs are compared in float32 (its rounding, ~6e-8, is far below their
    # tolerances) to halve the memory traffic of comparing large outputs; others in f64.
    work = torch.float32 if _is_16bit(dtype) else torch.float64
    cr = as_real(c).to(work)
    er = as_real(e).to(work)
    if ref is not None and tuple(ref.shape) == tuple(eager.shape):
        rr = as_real(ref.detach().to(dev))
        rr = rr.to(work)
    else:
        rr = er
        details["reference"] = "eager"
    shape_r = tuple(cr.shape)

    # The common case, every value of all three finite, skips the NaN/Inf analysis below:
    # it made ~25 full passes over the outputs (a 51M-element output: seconds on the CPU).
    all_finite = all(
        bool(torch.isfinite(x).all()) for x in ((cr, er) if rr is er else (cr, er, rr))
    )
    if not all_finite:
        # --- NaN and Inf positions must agree with eager, except where eager is non-finite
        # and the float64 reference is not: that is eager's own error, and the candidate may
        # copy it or give a finite value (then checked against the reference below, with no
        # eager error to lean on).
        r_fin = torch.isfinite(rr) if rr is not er else None
        if r_fin is not None:
            # Eager non-finite where the float64 value is finite is eager's own error.
            trouble = ~torch.isfinite(er) & r_fin
            n_trouble = int(trouble.sum())
            spurious = ~torch.isfinite(cr) & torch.isfinite(er) & r_fin
            n_spurious = int(spurious.sum())
            if (
                n_spurious
                and n_trouble >= EAGER_UNRELIABLE_MIN
                and n_spurious <= EAGER_UNRELIABLE_FACTOR * n_trouble
            ):
                # Many such positions, and not reproducible (float16 grid_sampler_2d on CPU:
                # 2,700 to 17,000 NaN and some Inf in 2.2M outputs, a different set on every
                # call): eager cannot judge non-finite positions here. The caller leaves the
                # test out of the verdict; a candidate with far more trouble than eager fails.
                details["eager_unreliable"] = (
                    f"eager is non-finite at {n_trouble} positions where float64 is finite; the "
                    f"candidate at {n_spurious} where neither is"
                )
                cr = torch.where(spurious, torch.nan, cr)
                er = torch.where(spurious, torch.nan, er)
            excused = trouble & torch.isfinite(cr)
            if bool(excused.any()):
                # the candidate is finite where eager failed: judge it against the reference
                details["eager_nonfinite_not_in_reference"] = int(excused.sum())
                er = torch.where(excused, rr, er)
            cr_nonfin = trouble & ~torch.isfinite(cr)
            if bool(cr_nonfin.any()):
                # both eager and the candidate fail there: PyTorch's behaviour, accepted
                cr = torch.where(cr_nonfin, torch.nan, cr)
                er = torch.where(cr_nonfin, torch.nan, er)
        c_nan, e_nan = torch.isnan(cr), torch.isnan(er)
        if not torch.equal(c_nan, e_nan):
            bad = (c_nan != e_nan).reshape(-1).nonzero()
            first = int(bad[0])
            return Comparison(
                "nan_mismatch",
                f"{where}: NaN at {int(bad.numel())} positions differs from eager; at "
                f"{_fmt_index(first, shape_r)} got {cr.reshape(-1)[first].item()}, "
                f"expected {er.reshape(-1)[first].item()}",
            )
        c_inf, e_inf = torch.isinf(cr), torch.isinf(er)
        inf_bad = (c_inf | e_inf) & ~((c_inf & e_inf) & (torch.sign(cr) == torch.sign(er)))
        if bool(inf_bad.any()):
            finfo_max = (
                torch.finfo(dtype).max
                if dtype.is_floating_point
                else torch.finfo(
                    {torch.complex32: torch.float16, torch.complex64: torch.float32}.get(
                        dtype, torch.float64
                    )
                ).max
            )
            near = finfo_max * (1 - max(rtol, 1e-3))
            edge = (
                torch.isfinite(rr)
                & (rr.abs() >= near)
                & (cr.abs() >= near)
                & (er.abs() >= near)
                & (torch.sign(cr) == torch.sign(er))
            )
            really_bad = inf_bad & ~edge
            if bool(really_bad.any()):
                bad = really_bad.reshape(-1).nonzero()
                first = int(bad[0])
                return Comparison(
                    "nan_mismatch",
                    f"{where}: +-Inf at {int(bad.numel())} positions differs from eager; at "
                    f"{_fmt_index(first, shape_r)} got {cr.reshape(-1)[first].item()}, "
                    f"expected {er.reshape(-1)[first].item()}",
                )
            details["inf_at_range_edge"] = int(inf_bad.sum())
    finite: torch.Tensor | None = None
    if all_finite:  # no masked copies of large tensors
        cf, ef, rf = cr.reshape(-1), er.reshape(-1), rr.reshape(-1)
    else:
        finite = torch.isfinite(cr) & torch.isfinite(er) & torch.isfinite(rr)
        if bool(finite.all()):
            cf, ef, rf = cr.reshape(-1), er.reshape(-1), rr.reshape(-1)
            finite = None
        elif not bool(finite.any()):
            return Comparison(details=details)
        else:
            cf, ef, rf = cr[finite], er[finite], rr[finite]
    # in place where a temporary would be another full-size allocation (this block was
    # most of the harness's time on a 51M-element output; the masked max's copy alone
    # a third of it)
    err_c = torch.sub(cf, rf).abs_()
    err_e = torch.sub(ef, rf).abs_()
    absr = rf.abs()
    allowed = (err_e * K).add_(atol).add_(absr, alpha=rtol)
    max_abs = float(err_c.max())
    rel = err_c / absr.clamp_min(torch.finfo(work).tiny)
    # relative errors where the reference is 0 are not relative errors (0 when all are)
    max_rel = float(rel.masked_fill_(absr == 0, 0.0).max())
    over = err_c > allowed
    if not bool(over.any()):
        return Comparison(max_abs_err=max_abs, max_rel_err=max_rel, details=details)

    # --- elementwise failed: the norm test for accumulating ops
    ratio = err_c - allowed
    worst = int(ratio.argmax())
    if finite is None:
        worst_flat = worst
    else:
        worst_flat = int(finite.reshape(-1).nonzero().reshape(-1)[worst])
    if norm_fallback is None:
        norm_fallback = uses_norm_fallback(op, int(eager.numel()), max_in_numel)
    n = int(err_c.numel())
    if norm_fallback:
        nc = float(torch.linalg.vector_norm(err_c))
        ne = float(torch.linalg.vector_norm(err_e))
        nr = float(torch.linalg.vector_norm(rf))
        norm_allowed = K * ne + atol * math.sqrt(n) + rtol * nr
        max_allowed = K * float(err_e.max()) + atol + rtol * float(absr.max())
        details["norm_test"] = {
            "err_norm": nc,
            "allowed_norm": norm_allowed,
            "eager_err_norm": ne,
            "max_err": max_abs,
            "allowed_max": max_allowed,
        }
        if nc <= norm_allowed and max_abs <= max_allowed:
            details["passed_by"] = "norm"
            return Comparison(max_abs_err=max_abs, max_rel_err=max_rel, details=details)
    n_over = int(over.sum())
    msg = (
        f"{where}: max abs err {err_c[worst].item():.3g} at "
        f"{_fmt_index(worst_flat, shape_r)} > allowed {allowed[worst].item():.3g} "
        f"(eager err {err_e[worst].item():.3g}; got {cf[worst].item():.8g}, "
        f"reference {rf[worst].item():.8g}); {n_over} of {n} elements out of tolerance"
    )
    if norm_fallback:
        nt = details["norm_test"]
        msg += (
            f"; norm test also failed (err norm {nt['err_norm']:.3g} vs allowed "
            f"{nt['allowed_norm']:.3g}, max {nt['max_err']:.3g} vs {nt['allowed_max']:.3g})"
        )
    return Comparison(
        "wrong_result", msg, max_abs_err=max_abs, max_rel_err=max_rel, details=details
    )


def _is_16bit(dtype: torch.dtype) -> bool:
    return dtype in (torch.float16, torch.bfloat16, torch.complex32)
