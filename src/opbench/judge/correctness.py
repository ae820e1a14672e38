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
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from opbench.instrument import tensors

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

#: Eager NaN (where float64 is finite) at this many positions or more marks eager as
#: unreliable for judging non-finite positions of that output.
EAGER_UNRELIABLE_MIN = 16
#: ... and then a candidate may be non-finite (where eager and float64 are finite) at up
#: to this many times eager's count (eager's own count varies ~6x between calls there).
EAGER_UNRELIABLE_FACTOR = 10

#: Multiple of eager PyTorch's own error (vs float64) a candidate may have.
K: float = 3.0


@dataclass(frozen=True)
class Tolerance:
    """Per-dtype floors: ``atol`` (absolute) and ``rtol`` (relative to ``|r|``)."""

    atol: float
    rtol: float


#: Floors per output dtype: ``torch.testing.assert_close``'s defaults.
#:
#: ============  =========  ========
#: dtype          atol       rtol
#: ============  =========  ========
#: float16        1e-5       1e-3
#: bfloat16       1e-5       1.6e-2
#: float32        1e-5       1.3e-6
#: float64        1e-7       1e-7
#: complex32      1e-5       1e-3
#: complex64      1e-5       1.3e-6
#: complex128     1e-7       1e-7
#: float8 types   1e-3       0.125 / 0.25 (e4m3 / e5m2: 3 and 2 mantissa bits)
#: ============  =========  ========
TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float16: Tolerance(1e-5, 1e-3),
    torch.bfloat16: Tolerance(1e-5, 1.6e-2),
    torch.float32: Tolerance(1e-5, 1.3e-6),
    torch.float64: Tolerance(1e-7, 1e-7),
    torch.complex32: Tolerance(1e-5, 1e-3),
    torch.complex64: Tolerance(1e-5, 1.3e-6),
    torch.complex128: Tolerance(1e-7, 1e-7),
}
for _name, _rtol in (
    ("float8_e4m3fn", 0.125),
    ("float8_e4m3fnuz", 0.125),
    ("float8_e5m2", 0.25),
    ("float8_e5m2fnuz", 0.25),
):
    if hasattr(torch, _name):
        TOLERANCES[getattr(torch, _name)] = Tolerance(1e-3, _rtol)

#: Ops whose outputs accumulate many rounding errors in an order the kernel chooses.
NORM_FALLBACK_OPS: frozenset[str] = frozenset(
    """
    sum nansum mean var std var_mean std_mean prod norm linalg_vector_norm frobenius_norm
    nuclear_norm renorm logsumexp logcumsumexp cumsum cumprod cummax cummin
    mm bmm addmm addbmm baddbmm addmv addr mv dot vdot matmul linear einsum tensordot
    inner outer ger kron chain_matmul _addmm_activation
    convolution _convolution conv1d conv2d conv3d conv_transpose1d conv_transpose2d
    conv_transpose3d cudnn_convolution convolution_backward _convolution_double_backward
    _softmax _log_softmax softmax log_softmax _softmax_backward_data _log_softmax_backward_data
    native_layer_norm native_layer_norm_backward native_group_norm native_group_norm_backward
    native_batch_norm native_batch_norm_backward _native_batch_norm_legit
    _native_batch_norm_legit_no_training batch_norm_backward rms_norm _fused_rms_norm
    layer_norm group_norm batch_norm instance_norm
    avg_pool1d avg_pool2d avg_pool3d avg_pool2d_backward avg_pool3d_backward
    adaptive_avg_pool1d adaptive_avg_pool2d _adaptive_avg_pool2d _adaptive_avg_pool3d
    _adaptive_avg_pool2d_backward _adaptive_avg_pool3d_backward
    upsample_bilinear2d upsample_bicubic2d upsample_trilinear3d upsample_linear1d
    upsample_bilinear2d_backward upsample_nearest2d_backward
    _scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_efficient_attention
    _scaled_dot_product_flash_attention scaled_dot_product_attention
    _scaled_dot_product_attention_math
    embedding_dense_backward embedding_bag _embedding_bag _embedding_bag_forward_only
    _embedding_bag_backward _embedding_bag_dense_backward _embedding_bag_per_sample_weights_backward
    index_add scatter_add scatter_reduce index_reduce index_put _index_put_impl segment_reduce
    nll_loss_forward nll_loss2d_forward nll_loss nll_loss_backward nll_loss2d_backward
    mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy
    binary_cross_entropy_with_logits kl_div cross_entropy_loss soft_margin_loss
    multi_margin_loss multilabel_margin_loss_forward margin_ranking_loss hinge_embedding_loss
    cosine_similarity cosine_embedding_loss pairwise_distance cdist _cdist_forward
    _cdist_backward pdist _pdist_forward dist trace diag_embed grid_sampler_2d
    grid_sampler_2d_backward col2im im2col _weight_norm_interface cholesky linalg_cholesky_ex
    linalg_inv_ex linalg_solve linalg_lu_factor_ex linalg_qr linalg_eigh linalg_svd _linalg_svd
    _linalg_det _linalg_slogdet _linalg_eigh _linalg_solve_ex triangular_solve
    linalg_solve_triangular cholesky_solve cholesky_inverse logdet det slogdet lu_solve
    linalg_lstsq linalg_matrix_exp matrix_exp polar histc bincount trapz trapezoid
    cumulative_trapezoid fft_fft fft_ifft fft_rfft fft_irfft _fft_r2c _fft_c2r _fft_c2c
    """.split()
)


def uses_norm_fallback(op: str, out_numel: int = 0, max_in_numel: int = 0) -> bool:
    """Whether ``op`` (``sum.dim_IntList``) accumulates, so the norm test is allowed.

    True for the families in :data:`NORM_FALLBACK_OPS` (in-place and ``out=`` variants
    included) and for any op whose output has fewer elements than its largest input
    (an unlisted reduction).
    """
    base = op.split(".", 1)[0].rstrip("_")
    if base.startswith("_") and base.lstrip("_") in NORM_FALLBACK_OPS:
        return True
    if base in NORM_FALLBACK_OPS:
        return True
    return 0 < out_numel < max_in_numel


def tolerance_for(dtype: torch.dtype) -> Tolerance:
    """Floors for an output dtype (exact, zero floors, for integers and bool)."""
    return TOLERANCES.get(dtype, Tolerance(0.0, 0.0))


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


# --------------------------------------------------------------------------- results


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


def _where(path: str) -> str:
    return f"output{path}" if path else "output"


def _as_real(t: torch.Tensor) -> torch.Tensor:
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
    where = _where(path)
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
    cr = _as_real(c).to(work)
    er = _as_real(e).to(work)
    if ref is not None and tuple(ref.shape) == tuple(eager.shape):
        rr = _as_real(ref.detach().to(dev))
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
                    return Comparison("wrong_result", f"{_where(path)}: got {c!r}, expected {e!r}")
                continue
            if type(c) is not type(e):
                return Comparison(
                    "wrong_meta",
                    f"{_where(path)}: Python {type(c).__name__}, expected {type(e).__name__}",
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
            all_details[_where(path)] = res.details
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


def _trivial_like(e: Any, kind: str, first_input: torch.Tensor | None) -> Any:
    if isinstance(e, (tuple, list)):
        seq = [_trivial_like(v, kind, first_input) for v in e]
        return seq if isinstance(e, list) else tuple(seq)
    if not isinstance(e, torch.Tensor):
        return e
    e = e.detach().cpu()
    if kind == "zeros":
        return torch.zeros_like(e)
    if kind == "constant":
        if e.numel() == 0:
            return torch.zeros_like(e)
        if e.dtype == torch.bool:
            # the majority value
            return torch.full_like(e, bool(e.sum() * 2 >= e.numel()))
        src = _as_real(e).to(torch.float64) if (e.dtype.is_complex) else e.to(torch.float64)
        fin = src[torch.isfinite(src)]
        m = float(fin.mean()) if fin.numel() else 0.0
        if not (e.dtype.is_floating_point or e.dtype.is_complex):
            m = round(m)
        return torch.full_like(e, m)
    if kind == "input_copy":
        if first_input is None or tuple(first_input.shape) != tuple(e.shape):
            return None
        try:
            return first_input.detach().cpu().to(e.dtype).clone()
        except (RuntimeError, TypeError):
            return None
    raise ValueError(kind)


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
    for kind in kinds:
        try:
            answer = _trivial_like(base if kind == "constant" else eager, kind, first_input)
        except (RuntimeError, TypeError, ValueError):
            continue
        if (
            answer is None
            or any(v is None for _, v in leaves(answer))
            and not any(v is None for _, v in leaves(eager))
        ):
            continue
        if kind == "constant":
            answer = _cast_like(answer, eager)
        if sampled:
            # Most trivial answers fail somewhere in any sample; only a sample that passes
            # is worth the full comparison (seconds per large output on a small CPU).
            picks = _sample_picks(eager)
            if not compare_outputs(
                _sample(answer, picks), _sample(eager, picks), _sample(ref, picks), **compare_kwargs
            ).ok:
                continue
        res = compare_outputs(answer, eager, ref, **compare_kwargs)
        if res.ok:
            passing.append(kind)
    return passing


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
