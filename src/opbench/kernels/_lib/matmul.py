"""The matmul family (``mm``, ``bmm``, ``addmm``, ``baddbmm``): one tiled Triton kernel, its
launcher, the configurations per shape bucket, and the ATen entry points.

One kernel serves all four: ``C[b] = alpha * (A[b] @ B[b]) + beta * bias[b]``, batch
``b`` folded into grid axis 0 (axis 1 would cap a ``bmm`` at 65,535 matrices), each
operand addressed through its own strides, so transposed and sliced operands
(``x.t()``, ``x[:, ::2]``, a stride-0 expanded bias) are read where they lie, never
copied. Tiles are visited in groups of ``GROUP_M`` rows of tiles so neighbouring programs
share the same panel of ``B`` in L2.

Numerics: float16 and bfloat16 operands go to ``tl.dot`` as they are, accumulating in
float32 (tensor cores), and the result is rounded once to the output dtype after the
``alpha``/``beta`` epilogue. float32 is multiplied in full precision
(``input_precision="ieee"``), as eager does with ``torch.backends.cuda.matmul.allow_tf32``
off (its default); TF32 would fail a float64-relative check on long reductions. Under
Triton's interpreter every tile is converted to float32 before the dot (it multiplies
16-bit arrays in their own precision otherwise). float64 and integer operands are declined
(``NotImplementedError``: ``tl.dot`` has no float64 or integer path we trust on both
Triton 3.6 and 3.9), so PyTorch serves them.

``beta == 0`` ignores the bias altogether (NaN and Inf in it do not propagate, as
documented for ``addmm``); ``K == 0`` gives ``beta * bias`` (zeros for ``mm``).

Configurations (``BLOCK_M``, ``BLOCK_N``, ``BLOCK_K``, ``GROUP_M``, warps, stages) are
chosen per bucket of (element size, M, N, K) from :data:`CONFIGS`, a table tuned ahead of
time on the GPU by ``benchmarks/tune_matmul.py`` into ``matmul_configs.py`` beside this
file; nothing is tuned inside a call.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.launch import Launcher, cdiv
from opbench.kernels._lib.matmul_configs import TUNED

__all__ = ["addmm", "baddbmm", "bmm", "matmul_into", "mm", "CONFIGS", "bucket", "config_for"]

_INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

#: Only triton.language builtins inside the kernels (``tl.full``, not ``tl.zeros`` or
#: ``tl.cdiv``): where Triton was imported before ``TRITON_INTERPRET`` was set, the
#: language's own ``@jit`` helpers are compiled-mode objects the interpreter cannot call
#: (see ``norm.sum_f``).

_TL = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}


@triton.jit(do_not_specialize=["M", "N", "K", "batch"])
def _mm_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr,
    M: tl.int64, N: tl.int64, K: tl.int64, batch: tl.int64,
    s_ab: tl.int64, s_am: tl.int64, s_ak: tl.int64,
    s_bb: tl.int64, s_bk: tl.int64, s_bn: tl.int64,
    s_cb: tl.int64, s_cm: tl.int64, s_cn: tl.int64,
    s_xb: tl.int64, s_xm: tl.int64, s_xn: tl.int64,
    alpha: tl.float64, beta: tl.float64,
    HAS_BIAS: tl.constexpr, SCALED: tl.constexpr, IEEE: tl.constexpr, TO_F32: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0).to(tl.int64)
    tiles_m = (M + BLOCK_M - 1) // BLOCK_M
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    per_matrix = tiles_m * tiles_n
    b = pid // per_matrix
    t = pid - b * per_matrix
    # grouped order: GROUP_M tile rows sweep a column of tiles together
    per_group = GROUP_M * tiles_n
    group = t // per_group
    first_m = group * GROUP_M
    group_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (t % per_group) % group_m
    pid_n = (t % per_group) // group_m

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    n_ok = rn < N
    a_ptrs = a_ptr + b * s_ab + rm[:, None] * s_am + rk[None, :] * s_ak
    b_ptrs = b_ptr + b * s_bb + rk[:, None] * s_bk + rn[None, :] * s_bn
    acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + rk) < K
        a = tl.load(a_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        w = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        if TO_F32:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        if IEEE:
            acc = tl.dot(a, w, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K * s_ak
        b_ptrs += BLOCK_K * s_bk
    out = acc
    if SCALED:
        out = out * tl.cast(alpha, tl.float32)
    mask = m_ok[:, None] & n_ok[None, :]
    if HAS_BIAS:
        x = tl.load(bias_ptr + b * s_xb + rm[:, None] * s_xm + rn[None, :] * s_xn, mask=mask,
                    other=0.0).to(tl.float32)  # fmt: skip
        out = out + tl.cast(beta, tl.float32) * x
    c_ptrs = c_ptr + b * s_cb + rm[:, None] * s_cm + rn[None, :] * s_cn
    tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=mask)


_mm = Launcher(_mm_kernel)


# ----------------------------------------------------------------------------- configurations

#: (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages)
Config = tuple[int, int, int, int, int, int]

#: Size classes of a dimension: up to 32, up to 128, up to 1024, more.
_EDGES = (32, 128, 1024)


def _cls(n: int) -> int:
    return next((i for i, e in enumerate(_EDGES) if n <= e), len(_EDGES))


def bucket(itemsize: int, M: int, N: int, K: int) -> str:
    """The tuning bucket of a problem: element size and the size class of M, N and K
    (``"2:3:3:2"``: 16-bit, M > 1024, N > 1024, K up to 1024)."""
    return f"{itemsize}:{_cls(M)}:{_cls(N)}:{_cls(K)}"


def _default(itemsize: int, M: int, N: int) -> Config:
    """Untuned defaults, the usual H100 Triton shapes: 128x128x64 tiles for 16-bit
    operands on large outputs, narrower tiles for skinny ones, 64x64x32 for IEEE float32
    (CUDA-core FMAs: wide tiles spill registers)."""
    if itemsize == 4:
        return (64, 64, 32, 8, 4, 3)
    if M <= 32:
        return (16 if M <= 16 else 32, 128, 64, 8, 4, 4)
    if N <= 32:
        return (128, 32, 64, 8, 4, 4)
    if M <= 128 or N <= 128:
        return (64, 128, 64, 8, 4, 4)
    return (128, 128, 64, 8, 8, 3)


#: Tuned configurations per bucket (``matmul_configs.py``, written by
#: ``benchmarks/tune_matmul.py``); buckets not in it use :func:`_default`. A Python module,
#: not a data file: the static scan rightly flags kernels that read files.
CONFIGS: dict[str, Config] = dict(TUNED)


#: The interpreter multiplies with numpy: one tile size keeps tests fast, and masks get
#: exercised by any shape that is not a multiple of 32.
_INTERP_CONFIG: Config = (32, 32, 32, 4, 4, 1)


def config_for(itemsize: int, M: int, N: int, K: int) -> Config:
    if _INTERPRETING:
        return _INTERP_CONFIG
    return CONFIGS.get(bucket(itemsize, M, N, K)) or _default(itemsize, M, N)


# ----------------------------------------------------------------------------- launching


def matmul_into(
    out: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None = None,
    alpha: float = 1.0,
    beta: float = 1.0,
    config: Config | None = None,
) -> torch.Tensor:
    """``out[i] = alpha * a[i] @ b[i] + beta * bias[i]`` for 3-D ``[batch, M, K]`` and
    ``[batch, K, N]`` operands of one float dtype, into a 3-D ``out`` (any strides, not
    overlapping its inputs); ``bias`` broadcastable to ``out`` (expanded, not copied), or
    None. ``config`` overrides the bucket's (the tuning script)."""
    B, M, K = a.shape
    N = b.shape[2]
    if out.numel() == 0:
        return out
    bm, bn, bk, group, warps, stages = config or config_for(a.element_size(), M, N, K)
    has_bias = bias is not None and beta != 0
    x = bias.expand(B, M, N) if has_bias else out  # never read without a bias
    grid = (B * cdiv(M, bm) * cdiv(N, bn),)
    _mm(
        grid,
        (a, b, out, x, M, N, K, B, *a.stride(), *b.stride(), *out.stride(), *x.stride(),
         float(alpha), float(beta)),
        HAS_BIAS=has_bias, SCALED=alpha != 1, IEEE=a.dtype == torch.float32,
        TO_F32=_INTERPRETING, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip
    return out


# ----------------------------------------------------------------------------- ATen entry points


def _type_name(dtype: torch.dtype) -> str:
    return {torch.float16: "c10::Half", torch.bfloat16: "c10::BFloat16", torch.float32: "float",
            torch.float64: "double"}.get(dtype, str(dtype).removeprefix("torch."))  # fmt: skip


def _scalar_name(dtype: torch.dtype) -> str:
    return {torch.float16: "Half", torch.bfloat16: "BFloat16", torch.float32: "Float",
            torch.float64: "Double"}.get(dtype, str(dtype).removeprefix("torch."))  # fmt: skip


def _served(dtype: torch.dtype) -> None:
    """Decline what we do not multiply (float64, integers, complex): PyTorch serves it."""
    if dtype not in _TL:
        raise NotImplementedError(f"matmul on {dtype}: no Triton kernel here")


def _check_mm(mat1: torch.Tensor, mat2: torch.Tensor) -> None:
    """Eager's checks and messages for two matrices, in its order."""
    if mat1.dim() != 2:
        raise RuntimeError("self must be a matrix")
    if mat2.dim() != 2:
        raise RuntimeError("mat2 must be a matrix")
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} "
            f"and {mat2.shape[0]}x{mat2.shape[1]})"
        )
    if mat1.dtype != mat2.dtype:
        raise RuntimeError(
            "expected m1 and m2 to have the same dtype, but got: "
            f"{_type_name(mat1.dtype)} != {_type_name(mat2.dtype)}"
        )


def _check_bmm(b1: torch.Tensor, b2: torch.Tensor) -> None:
    if b1.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b2.dim() != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if b1.shape[0] != b2.shape[0] or b1.shape[2] != b2.shape[1]:
        raise RuntimeError(
            "Expected size for first two dimensions of batch2 tensor to be: "
            f"[{b1.shape[0]}, {b1.shape[2]}] but got: [{b2.shape[0]}, {b2.shape[1]}]."
        )
    if b1.dtype != b2.dtype:
        raise RuntimeError(
            f"expected scalar type {_scalar_name(b1.dtype)} but found {_scalar_name(b2.dtype)}"
        )


def _bias_for(bias: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    try:
        return bias.expand(shape)
    except RuntimeError:
        raise RuntimeError(
            f"The expanded size of the tensor ({shape[-1]}) must match the existing size "
            f"({bias.shape[-1] if bias.dim() else 1}) at non-singleton dimension "
            f"{len(shape) - 1}.  Target sizes: {list(shape)}.  Tensor sizes: "
            f"{list(bias.shape)}"
        ) from None


def mm(self: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
    """aten::mm: ``self @ mat2`` for 2-D operands."""
    _check_mm(self, mat2)
    _served(self.dtype)
    out = torch.empty((self.shape[0], mat2.shape[1]), dtype=self.dtype, device=self.device)
    matmul_into(out.unsqueeze(0), self.unsqueeze(0), mat2.unsqueeze(0))
    return out


def bmm(self: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
    """aten::bmm: a batch of ``self[i] @ mat2[i]``."""
    _check_bmm(self, mat2)
    _served(self.dtype)
    shape = (self.shape[0], self.shape[1], mat2.shape[2])
    out = torch.empty(shape, dtype=self.dtype, device=self.device)
    return matmul_into(out, self, mat2)


def addmm(self: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: Any = 1,
          alpha: Any = 1) -> torch.Tensor:  # fmt: skip
    """aten::addmm: ``beta * self + alpha * (mat1 @ mat2)``; ``self`` broadcast to the
    result, ignored when ``beta == 0``."""
    _check_mm(mat1, mat2)
    if self.dtype != mat1.dtype:
        raise RuntimeError(
            f"self and mat2 must have the same dtype, but got {_scalar_name(self.dtype)} and "
            f"{_scalar_name(mat2.dtype)}"
        )
    _served(mat1.dtype)
    _check_scalars(alpha, beta)
    shape = (mat1.shape[0], mat2.shape[1])
    bias = _bias_for(self, shape)
    out = torch.empty(shape, dtype=mat1.dtype, device=mat1.device)
    matmul_into(out.unsqueeze(0), mat1.unsqueeze(0), mat2.unsqueeze(0), bias.unsqueeze(0),
                alpha, beta)  # fmt: skip
    return out


def baddbmm(self: torch.Tensor, batch1: torch.Tensor, batch2: torch.Tensor, *,
            beta: Any = 1, alpha: Any = 1) -> torch.Tensor:  # fmt: skip
    """aten::baddbmm: ``beta * self + alpha * (batch1 @ batch2)`` per batch."""
    _check_bmm(batch1, batch2)
    if self.dtype != batch1.dtype:
        raise RuntimeError(
            f"Input dtypes must be the same, got: input {_type_name(self.dtype)}, batch1: "
            f"{_type_name(batch1.dtype)}, batch2: {_type_name(batch2.dtype)}"
        )
    _served(batch1.dtype)
    _check_scalars(alpha, beta)
    shape = (batch1.shape[0], batch1.shape[1], batch2.shape[2])
    bias = _bias_for(self, shape)
    out = torch.empty(shape, dtype=batch1.dtype, device=batch1.device)
    return matmul_into(out, batch1, batch2, bias, alpha, beta)


def _check_scalars(alpha: Any, beta: Any) -> None:
    for s in (alpha, beta):
        if isinstance(s, complex) or isinstance(s, torch.Tensor):
            raise NotImplementedError("complex or tensor alpha/beta: no Triton kernel here")
