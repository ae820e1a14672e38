"""The tolerances of the correctness rule: how far from float64 a candidate may be.

Owns :data:`K` (the multiple of eager PyTorch's own error a candidate may have), the
per-dtype floors (:data:`TOLERANCES`, :func:`tolerance_for`: ``torch.testing.assert_close``'s
defaults), the limits on eager's own non-finite values, and which operators accumulate
rounding in an order the kernel chooses and so may pass by the norm test
(:data:`NORM_FALLBACK_OPS`, :func:`uses_norm_fallback`). The rule that uses them is
:mod:`opbench.judge.correctness`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "EAGER_UNRELIABLE_FACTOR",
    "EAGER_UNRELIABLE_MIN",
    "K",
    "NORM_FALLBACK_OPS",
    "TOLERANCES",
    "Tolerance",
    "tolerance_for",
    "uses_norm_fallback",
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
