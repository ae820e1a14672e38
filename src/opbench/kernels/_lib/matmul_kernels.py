"""The Triton device code of :mod:`opbench.kernels._lib.matmul`: the one tiled kernel
behind ``mm``, ``bmm``, ``addmm``, ``baddbmm``, the pointwise convolutions' products and
the batch-summing mode (``BATCH_K``). :mod:`~opbench.kernels._lib.matmul` owns the rest
(configurations per shape, split-K and batch groups, the ATen entry points; the operand
layouts and their vector widths are :mod:`~opbench.kernels._lib.matmul_pointer`'s) and
every tunable constant: ``--set matmul.NAME=VALUE``
(``benchmarks/common/kernel_overrides.py``) sets them there, and they reach this kernel
only as constexpr arguments of a launch, never as globals read here (Triton would
capture a global's value at the first compile).

Separate so the launch planning can be read apart from the device code, as the
convolutions are (``conv`` and ``conv_kernels``). A leaf like
:mod:`~opbench.kernels._lib.matmul_shared`, whose :func:`dot_acc` it calls: it imports
neither ``matmul`` nor ``matmul_tma``.

Operand layouts (``A_LAYOUT``, ``B_LAYOUT``, ``C_LAYOUT``): 0 general strides, 1 rows
contiguous, 2 columns contiguous (``matmul_pointer.ANY``, ``ROW``, ``COL``).
"""

from __future__ import annotations

import triton.language as tl

from opbench.kernels._lib.launch import jit_unspecialized
from opbench.kernels._lib.matmul_shared import dot_acc

__all__ = ["_mm_kernel"]

#: Only triton.language builtins inside the kernels (``tl.full``, not ``tl.zeros`` or
#: ``tl.cdiv``): where Triton was imported before ``TRITON_INTERPRET`` was set, the
#: language's own ``@jit`` helpers are compiled-mode objects the interpreter cannot call
#: (see ``norm.sum_f``).


@jit_unspecialized
def _mm_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr,
    Mq: tl.int64, Nq: tl.int64, Kq: tl.int64, k_per_q: tl.int64,
    s_ab: tl.int64, s_am: tl.int64, s_ak: tl.int64,
    s_bb: tl.int64, s_bk: tl.int64, s_bn: tl.int64,
    s_cs: tl.int64, s_cb: tl.int64, s_cm: tl.int64, s_cn: tl.int64,
    s_xb: tl.int64, s_xm: tl.int64, s_xn: tl.int64,
    alpha: tl.float64, beta: tl.float64,
    HAS_BIAS: tl.constexpr, BIAS_MODE: tl.constexpr, SCALED: tl.constexpr,
    IEEE: tl.constexpr, TO_F32: tl.constexpr, DM: tl.constexpr, DN: tl.constexpr, DK: tl.constexpr,
    A_LAYOUT: tl.constexpr, DA: tl.constexpr, B_LAYOUT: tl.constexpr, DB: tl.constexpr,
    C_LAYOUT: tl.constexpr, DC: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    BATCH_K: tl.constexpr,
):  # fmt: skip
    # Sizes and strides arrive divided by what they are known to be multiples of (the
    # D* constexprs) and are multiplied back here: Triton's alignment analysis then sees
    # the divisibility, keeps masks constant over a vector and issues 16-byte loads, while
    # one compiled kernel still serves every value (none of them is specialized).
    M = Mq * DM
    N = Nq * DN
    K = Kq * DK
    # A, B and C alike, kept apart: constexpr branches per operand fold at compile time;
    # a helper returning two strides would change the kernel's code
    if A_LAYOUT == 1:
        sam = s_am * DA
        sak = 1
    elif A_LAYOUT == 2:
        sam = 1
        sak = s_ak * DA
    else:
        sam = s_am
        sak = s_ak
    if B_LAYOUT == 1:
        sbk = s_bk * DB
        sbn = 1
    elif B_LAYOUT == 2:
        sbk = 1
        sbn = s_bn * DB
    else:
        sbk = s_bk
        sbn = s_bn
    if C_LAYOUT == 1:
        scm = s_cm * DC
        scn = 1
    elif C_LAYOUT == 2:
        scm = 1
        scn = s_cn * DC
    else:
        scm = s_cm
        scn = s_cn

    pid = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1).to(tl.int64)
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

    if BATCH_K:
        # the reduction runs over the batch too: C = sum_b A[b] @ B[b] (one output matrix,
        # the grid's tiles are its tiles, b == 0 so far); program axis 1 is a group of
        # k_per_q / kb whole batch entries, kb blocks of K each, starting at entry b
        kb = (K + BLOCK_K - 1) // BLOCK_K
        b = split * (k_per_q // tl.maximum(kb, 1))
        k_lo = 0
    else:
        k_lo = split * k_per_q * BLOCK_K  # each split: k_per_q blocks of K (all of K unsplit)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    n_ok = rn < N
    a_ptrs = a_ptr + b * (s_ab * DA) + rm[:, None] * sam + (k_lo + rk)[None, :] * sak
    b_ptrs = b_ptr + b * (s_bb * DB) + (k_lo + rk)[:, None] * sbk + rn[None, :] * sbn
    acc = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    comp = tl.full([BLOCK_M, BLOCK_N], 0, tl.float32)
    if BATCH_K:
        # one loop over (entry, K block) pairs, not a loop per entry: Triton pipelines
        # innermost loops only, and a 196-position image is 7 blocks of 32. The pointers
        # step a block along K, or, after an entry's last block, jump to the next entry's
        # first (a loop-invariant jump, chosen by a scalar select)
        a_jump = s_ab * DA - (kb - 1) * BLOCK_K * sak
        b_jump = s_bb * DB - (kb - 1) * BLOCK_K * sbk
        kk = K - K
        for _ in range(0, k_per_q):
            k_ok = (kk + rk) < K
            a = tl.load(a_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
            w = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
            acc, comp = dot_acc(a, w, acc, comp, IEEE, TO_F32)
            wrap = kk + BLOCK_K >= K
            a_ptrs += tl.where(wrap, a_jump, BLOCK_K * sak)
            b_ptrs += tl.where(wrap, b_jump, BLOCK_K * sbk)
            kk = tl.where(wrap, 0, kk + BLOCK_K)
        b = 0  # the output's matrix (its batch stride is 0 here anyway)
    else:
        # a count, not tl.minimum(K, ...) bounds: Triton 3.6's interpreter cannot range over
        # a tensor; the last split's blocks past K are masked off
        for i in range(0, k_per_q):
            k_ok = (k_lo + i * BLOCK_K + rk) < K
            a = tl.load(a_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
            w = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
            acc, comp = dot_acc(a, w, acc, comp, IEEE, TO_F32)
            a_ptrs += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
    out = acc
    if SCALED:
        out = out * tl.cast(alpha, tl.float32)
    mask = m_ok[:, None] & n_ok[None, :]
    if HAS_BIAS:
        # a bias vector is loaded once per tile and broadcast (BIAS_MODE, see
        # bias_mode): loading it through a [BLOCK_M, BLOCK_N] grid of 64-bit addresses
        # spilled registers on every tile of 128x128 or more (sm_90: 255 registers and
        # 468 bytes of spills at 128x128x64, 4 warps; none without the bias)
        xb = bias_ptr + b * s_xb
        if BIAS_MODE == 1:
            x = tl.load(xb + rn * s_xn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
        elif BIAS_MODE == 2:
            x = tl.load(xb + rm * s_xm, mask=m_ok, other=0.0).to(tl.float32)[:, None]
        elif BIAS_MODE == 3:
            x = tl.load(xb + rm[:, None] * s_xm + rn[None, :], mask=mask, other=0.0).to(tl.float32)
        else:
            x = tl.load(xb + rm[:, None] * s_xm + rn[None, :] * s_xn, mask=mask,
                        other=0.0).to(tl.float32)  # fmt: skip
        out = out + tl.cast(beta, tl.float32) * x
    # split-K partials go to a workspace [splits, batch, M, N] (s_cs apart)
    c_ptrs = c_ptr + split * (s_cs * DC) + b * (s_cb * DC) + rm[:, None] * scm + rn[None, :] * scn
    tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=mask)
