"""Layer norm, forward and backward (``native_layer_norm``, ``native_layer_norm_backward``):
Triton kernels, their launchers and the ATen-schema entry points, and the helpers the
normalization kernels share (:mod:`opbench.kernels._lib.batch_norm` uses them too).

Numerics: every element is loaded and converted to the compute type first (float32 for
f16, bf16 and f32; float64 for f64), statistics accumulate in it, and the variance is
computed from centred values (two passes over a row held in registers, or Chan's merge of
per-tile mean and M2), never as E[x^2] - E[x]^2.

Metadata follows eager on the device it runs on (they differ): ``mean``/``rstd`` have
shape ``input.shape[:axis] + [1] * len(normalized_shape)``; on CUDA their dtype is the
accumulate type (float32 for f16/bf16/f32), on the CPU the input's dtype unless the input
is f16/bf16 with a float32 weight or bias (then float32).

Rows of ``N = prod(normalized_shape)`` elements:

* ``N <= MAX_ROW_BLOCK``: one tile of ``BLOCK_M`` whole rows per program, the row kept in
  registers (one read of the input, one write of the output);
* longer rows: one row per program, looping over ``BLOCK_N`` chunks (three reads).

The forward kernel takes ``N`` as ``N // VEC`` times a constexpr ``VEC`` (the largest
power of two dividing N, at most 16), so Triton can prove row starts aligned and moves
16-byte vectors (with N an unspecialized integer it emitted one 2-byte load per f16
element: ``ld.global.b16`` x32 per thread of the [2, 2048] forward tile, now
``ld.global.v4.b32`` x4, in the sm_90 PTX).

The backward (two launches, deterministic, no atomics) runs at most ``LN_BWD_PROGRAMS``
programs, each looping over tiles of ``BLOCK_M`` rows (16-byte vector loads through
``VEC`` as the forward; no mask where the tile is full). A program writes its rows'
``grad_input`` and keeps its rows' sums of ``dy * xhat`` and ``dy`` in registers, so the
float32 partial-sum buffer has one row per program (``[1024, 1024]``: 128 rows of each
gradient, 1 MB, where 11239db's one-tile programs wrote 256, 2 MB, and ``[512, 1536]``
3 MB); one column-sum launch reduces them, each program loading all partial rows of its
column block at once. Tiles are laid out so the column sums stay inside a thread: with at
most ``BLOCK_N / (32 * 8)`` warps (f16) no warp shares a column with another, and the two
row sums go through one two-operand reduction (one shared-memory round trip a tile).
f6a2faf's backward (8192-element tiles at 16 warps, warps across rows and columns: 31
``bar.sync`` in its sm_90 PTX, 117 registers, one program an SM) ran its row kernel in
12.48 µs instead of 5.73 on [1024, 1024] f16 on the H100 and was reverted.

Host path: each op keeps a plan per key (shapes, dtypes, device, which of weight/bias
are None, output_mask; not eps, a runtime argument) holding grids, block sizes and
constexprs, so a repeat call only allocates and launches (:func:`~opbench.kernels._lib.launch.remember`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import triton
import triton.language as tl

from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING
from opbench.kernels._lib.launch import Launcher, cdiv, jit_unspecialized, next_pow2, remember
from opbench.kernels._lib.native_launch import declare_replay

__all__ = [
    "compute_types",
    "inv_sqrt",
    "layer_norm",
    "layer_norm_backward",
    "stat_dtype",
    "sum_f",
    "warps_for",
]


#: Longest row kept whole in registers by the layer-norm kernels (fp32: 64 values per
#: thread at 4 warps, 32 at 8); longer rows loop over chunks of this size.
MAX_ROW_BLOCK = 8192 if not _INTERPRETING else 65536
#: Elements per layer-norm forward tile (rows x padded columns): several short rows per
#: program so a 768-wide row does not leave most of a program idle...
LN_TILE = 4096 if not _INTERPRETING else 65536
#: ...but the forward takes fewer rows per program while that leaves fewer programs than
#: this (two per SM of an H100's 132): 128 rows of 2048 ran as 64 programs of two rows.
LN_FWD_MIN_PROGRAMS = 256 if not _INTERPRETING else 1
#: The backward's tile (rows x padded columns; long rows: one row in chunks of
#: MAX_ROW_BLOCK) and threads: LN_BWD_PER_THREAD elements of each input a thread, 4 to 16
#: warps. [4, 1024] f16 at 4 warps: each thread holds 8 columns of all 4 rows, so the
#: column sums (dw, db) never leave the thread: sm_90 SASS (Triton 3.6) 153 registers
#: (3 programs an SM could fit), 11 LDG.E.128 (x, dy, w, mean, rstd) issued before the
#: first use, 7 BAR.SYNC a tile. 11239db: the same tile at 8 warps, one 2-byte load an
#: element (218 registers, one program an SM).
LN_BWD_TILE = 4096 if not _INTERPRETING else 65536
LN_BWD_PER_THREAD = 32
#: Programs of the backward at most, each looping over its share of the tiles (and rows
#: of the partial-sum buffer): about one an SM of an H100's 132; the interpreter runs
#: programs one by one, so one.
LN_BWD_PROGRAMS = 132 if not _INTERPRETING else 1
#: While there are fewer tiles than this, tiles take fewer rows (more programs reading
#: a small input; each adds a partial row): [256, 1024] as 128 programs of 2 rows.
LN_BWD_MIN_PROGRAMS = 128 if not _INTERPRETING else 1
#: ``num_stages`` of the loop over a program's tiles: 1 is the plain loop; 2-3 Triton's
#: software pipeline (cp.async copies of the next tile's rows into shared memory while
#: one is computed: Triton pipelines non-dot loads only where the loop asks).
LN_BWD_STAGES = 1
#: The column sum of the partial rows: COLSUM_BLOCK_C columns a program, one program per
#: column block and gradient, up to COLSUM_TILE elements (partial rows x columns) loaded
#: at once (128 partial rows: one round of loads, 32 floats a thread at 4 warps).
COLSUM_BLOCK_C = 32 if not _INTERPRETING else 1024
COLSUM_TILE = 4096 if not _INTERPRETING else 65536


#: Results eager produces from degenerate variances (eps <= 0). No NaN global: compiled
#: Triton re-checks a kernel's globals on every ``kernel[grid]`` call by ``!=``, and a
#: NaN never equals itself ("Global variable _NAN has changed since we compiled this
#: kernel, from constexpr[nan] to constexpr[nan]" on the H100): NaN is written inline.
_INF: tl.constexpr = tl.constexpr(float("inf"))


@triton.jit
def inv_sqrt(v):
    """1 / sqrt(v), with inf at 0 and NaN below 0 produced without evaluating either (the
    interpreter's numpy warnings on them fail the op inside opbench's worker)."""
    r = 1.0 / tl.sqrt(tl.where(v > 0, v, 1.0))
    return tl.where(v > 0, r, tl.where(v == 0, _INF, float("nan")))


@triton.jit
def sum_f(x, axis: tl.constexpr):
    """``tl.sum`` for floats, written as the reduction it is: in some opbench workers
    Triton is imported before ``TRITON_INTERPRET`` is set, so triton.language's own
    ``@jit`` functions (``tl.sum``, ``tl.zeros``, ...) are compiled-mode objects that fail
    under the interpreter ("Cannot call @triton.jit'd outside of the scope of a kernel");
    ``tl.reduce`` is patched by the interpreter, which sums ``_sum_combine`` with numpy
    without calling it."""
    return tl.reduce(x, axis, tl.standard._sum_combine)


def warps_for(tile: int) -> int:
    return 4 if tile <= 2048 else 8


def compute_types(dtype: torch.dtype) -> tuple[Any, torch.dtype]:
    """(Triton compute type, torch dtype of float buffers) for an input of ``dtype``."""
    if dtype in (torch.float16, torch.bfloat16, torch.float32):
        return tl.float32, torch.float32
    if dtype == torch.float64:
        return tl.float64, torch.float64
    raise NotImplementedError(f"no Triton normalization kernel for {dtype}")


def stat_dtype(x: torch.Tensor, params: Sequence[torch.Tensor | None]) -> torch.dtype:
    """dtype of the saved statistics, as eager on ``x``'s device."""
    if x.device.type == "cuda":
        return torch.float64 if x.dtype == torch.float64 else torch.float32
    if x.dtype in (torch.float16, torch.bfloat16) and any(
        p is not None and p.dtype == torch.float32 for p in params
    ):
        return torch.float32  # CPU mixed-type path
    return x.dtype


# ----------------------------------------------------------------------------- layer norm


@jit_unspecialized
def _ln_fwd_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr,
    M: tl.int64, NV: tl.int64, eps: tl.float64,
    HAS_W: tl.constexpr, HAS_B: tl.constexpr, SINGLE: tl.constexpr,
    COMPUTE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, VEC: tl.constexpr,
):  # fmt: skip
    """Rows of ``N = NV * VEC`` elements: ``VEC`` (a power of two dividing N, at most 16)
    lets Triton prove every row start aligned, so it loads 16-byte vectors."""
    N = NV * VEC
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < M
    cols = tl.arange(0, BLOCK_N)
    e = tl.cast(eps, COMPUTE)
    if SINGLE:
        cmask = cols < N
        mask = rmask[:, None] & cmask[None, :]
        offs = rows[:, None] * N + cols[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(COMPUTE)
        mean = sum_f(x, axis=1) / N
        d = tl.where(mask, x - mean[:, None], 0.0)
        var = sum_f(d * d, axis=1) / N
        rstd = inv_sqrt(var + e)
        y = d * rstd[:, None]
        if HAS_W:
            w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(COMPUTE)
            y = y * w[None, :]
        if HAS_B:
            b = tl.load(b_ptr + cols, mask=cmask, other=0.0).to(COMPUTE)
            y = y + b[None, :]
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
    else:  # BLOCK_M == 1: one long row, in chunks
        base = rows[:, None] * N
        acc = tl.full([BLOCK_M, BLOCK_N], 0, COMPUTE)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            mask = rmask[:, None] & (c < N)[None, :]
            acc += tl.load(x_ptr + base + c[None, :], mask=mask, other=0.0).to(COMPUTE)
        mean = sum_f(acc, axis=1) / N
        acc = tl.full([BLOCK_M, BLOCK_N], 0, COMPUTE)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            mask = rmask[:, None] & (c < N)[None, :]
            x = tl.load(x_ptr + base + c[None, :], mask=mask, other=0.0).to(COMPUTE)
            d = tl.where(mask, x - mean[:, None], 0.0)
            acc += d * d
        var = sum_f(acc, axis=1) / N
        rstd = inv_sqrt(var + e)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            cmask = c < N
            mask = rmask[:, None] & cmask[None, :]
            x = tl.load(x_ptr + base + c[None, :], mask=mask, other=0.0).to(COMPUTE)
            y = (x - mean[:, None]) * rstd[:, None]
            if HAS_W:
                w = tl.load(w_ptr + c, mask=cmask, other=0.0).to(COMPUTE)
                y = y * w[None, :]
            if HAS_B:
                b = tl.load(b_ptr + c, mask=cmask, other=0.0).to(COMPUTE)
                y = y + b[None, :]
            tl.store(y_ptr + base + c[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + rows, mean.to(mean_ptr.dtype.element_ty), mask=rmask)
    tl.store(rstd_ptr + rows, rstd.to(rstd_ptr.dtype.element_ty), mask=rmask)


@triton.jit
def _add2(a0, b0, a1, b1):
    """Combine of a two-operand sum: both row sums of the backward in one reduction."""
    return a0 + a1, b0 + b1


@jit_unspecialized
def _ln_bwd_kernel(
    dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, part_ptr,
    M: tl.int64, NV: tl.int64, n_tiles: tl.int64, n_programs: tl.int64, db_row: tl.int64,
    HAS_W: tl.constexpr, DX: tl.constexpr, DW: tl.constexpr, DB: tl.constexpr,
    SINGLE: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    VEC: tl.constexpr, EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, STAGES: tl.constexpr,
):  # fmt: skip
    """Program ``pid`` takes tiles ``pid, pid + n_programs, ...`` of ``BLOCK_M`` rows of
    ``N = NV * VEC`` elements (``VEC`` as in the forward: 16-byte loads), writes their
    ``grad_input`` and one partial row of ``sum dy * xhat`` (row ``pid`` of ``part``) and
    of ``sum dy`` (row ``db_row + pid``), rows ``N`` floats apart. ``EVEN_M``/``EVEN_N``:
    every tile is full (``M % BLOCK_M == 0``) / a row fills ``BLOCK_N``; no masks then."""
    N = NV * VEC
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    dw_part_ptr = part_ptr + pid * N
    db_part_ptr = part_ptr + (db_row + pid) * N
    if SINGLE:
        cmask = cols < N
        if HAS_W:
            if EVEN_N:
                w = tl.load(w_ptr + cols).to(COMPUTE)
            else:
                w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(COMPUTE)
        dw_acc = tl.full([BLOCK_N], 0, COMPUTE)
        db_acc = tl.full([BLOCK_N], 0, COMPUTE)
        for tile in tl.range(pid, n_tiles, n_programs, num_stages=STAGES):
            rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
            offs = rows[:, None] * N + cols[None, :]
            if EVEN_M and EVEN_N:
                x = tl.load(x_ptr + offs).to(COMPUTE)
                dy = tl.load(dy_ptr + offs).to(COMPUTE)
            else:
                mask = (rows < M)[:, None] & cmask[None, :]
                x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(COMPUTE)
                dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(COMPUTE)
            if EVEN_M:
                mean = tl.load(mean_ptr + rows).to(COMPUTE)
                rstd = tl.load(rstd_ptr + rows).to(COMPUTE)
            else:
                mean = tl.load(mean_ptr + rows, mask=rows < M, other=0.0).to(COMPUTE)
                rstd = tl.load(rstd_ptr + rows, mask=rows < M, other=0.0).to(COMPUTE)
            xhat = (x - mean[:, None]) * rstd[:, None]
            if not EVEN_N:  # padding columns: 0, also where rstd is inf
                xhat = tl.where(cmask[None, :], xhat, 0.0)
            if DX:
                wdy = dy
                if HAS_W:
                    wdy = dy * w[None, :]
                s1, s2 = tl.reduce((xhat * wdy, wdy), 1, _add2)
                c1 = s1 / N
                c2 = s2 / N
                dx = (wdy - xhat * c1[:, None] - c2[:, None]) * rstd[:, None]
                if EVEN_M and EVEN_N:
                    tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty))
                else:
                    tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            if DW:
                dw_acc += sum_f(dy * xhat, axis=0)
            if DB:
                db_acc += sum_f(dy, axis=0)
        if DW:
            tl.store(dw_part_ptr + cols, dw_acc, mask=cmask)
        if DB:
            tl.store(db_part_ptr + cols, db_acc, mask=cmask)
    else:  # BLOCK_M == 1, long rows in chunks; partial rows read-modify-written (a
        # program's first tile, tile == pid, reads nothing: the buffer is not zeroed)
        for tile in range(pid, n_tiles, n_programs):
            rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
            rmask = rows < M
            base = rows[:, None] * N
            mean = tl.load(mean_ptr + rows, mask=rmask, other=0.0).to(COMPUTE)
            rstd = tl.load(rstd_ptr + rows, mask=rmask, other=0.0).to(COMPUTE)
            later = (cols * 0 + tile) != pid  # not this program's first tile (a vector:
            # the interpreter rejects a scalar bool in a mask)
            if DX:
                a1 = tl.full([BLOCK_M, BLOCK_N], 0, COMPUTE)
                a2 = tl.full([BLOCK_M, BLOCK_N], 0, COMPUTE)
                # Like the dx loop below, kept apart: this pass only sums c1, c2
                for start in range(0, N, BLOCK_N):
                    c = start + cols
                    cmask = c < N
                    mask = rmask[:, None] & cmask[None, :]
                    x = tl.load(x_ptr + base + c[None, :], mask=mask, other=0.0).to(COMPUTE)
                    dy = tl.load(dy_ptr + base + c[None, :], mask=mask, other=0.0).to(COMPUTE)
                    xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
                    wdy = dy
                    if HAS_W:
                        w = tl.load(w_ptr + c, mask=cmask, other=0.0).to(COMPUTE)
                        wdy = dy * w[None, :]
                    a1 += xhat * wdy
                    a2 += wdy
                c1 = sum_f(a1, axis=1) / N
                c2 = sum_f(a2, axis=1) / N
            # Like the c1/c2 loop above, kept apart: this pass writes dx; that one sums c1, c2
            for start in range(0, N, BLOCK_N):
                c = start + cols
                cmask = c < N
                mask = rmask[:, None] & cmask[None, :]
                x = tl.load(x_ptr + base + c[None, :], mask=mask, other=0.0).to(COMPUTE)
                dy = tl.load(dy_ptr + base + c[None, :], mask=mask, other=0.0).to(COMPUTE)
                xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
                if DX:
                    wdy = dy
                    if HAS_W:
                        w = tl.load(w_ptr + c, mask=cmask, other=0.0).to(COMPUTE)
                        wdy = dy * w[None, :]
                    dx = (wdy - xhat * c1[:, None] - c2[:, None]) * rstd[:, None]
                    tl.store(dx_ptr + base + c[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
                if DW:
                    p = tl.load(dw_part_ptr + c, mask=cmask & later, other=0.0)
                    tl.store(dw_part_ptr + c, p + sum_f(dy * xhat, axis=0), mask=cmask)
                if DB:
                    p = tl.load(db_part_ptr + c, mask=cmask & later, other=0.0)
                    tl.store(db_part_ptr + c, p + sum_f(dy, axis=0), mask=cmask)


@jit_unspecialized
def _colsum_kernel(
    src_ptr, dst_ptr, dst2_ptr, R: tl.int64, CV: tl.int64,
    VEC: tl.constexpr, COMPUTE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """``dst[c] = sum over r of src[r, c]`` for the ``C = CV * VEC`` columns of the R rows
    of ``src`` (contiguous): program ``(j, 0)`` sums column block j into ``dst``, program
    ``(j, 1)`` the next R rows of ``src`` into ``dst2`` (the weight's and the bias's
    gradients in one launch). ``VEC`` proves rows 16-byte aligned: vector loads."""
    C = CV * VEC
    pid = tl.program_id(0).to(tl.int64)
    which = tl.program_id(1)
    src = src_ptr + which.to(tl.int64) * R * C
    cols = pid * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < C
    acc = tl.full([BLOCK_R, BLOCK_C], 0, COMPUTE)
    for start in range(0, R, BLOCK_R):
        rows = start + tl.arange(0, BLOCK_R)
        mask = (rows < R)[:, None] & cmask[None, :]
        acc += tl.load(src + rows[:, None] * C + cols[None, :], mask=mask, other=0.0).to(COMPUTE)
    total = sum_f(acc, axis=0)
    if which == 0:
        tl.store(dst_ptr + cols, total.to(dst_ptr.dtype.element_ty), mask=cmask)
    else:
        tl.store(dst2_ptr + cols, total.to(dst2_ptr.dtype.element_ty), mask=cmask)


_ln_fwd = Launcher(_ln_fwd_kernel)
_ln_bwd = Launcher(_ln_bwd_kernel)
_colsum = Launcher(_colsum_kernel)

#: Plans (grids, block sizes, constexprs, output metadata) are kept per op, keyed on
#: what decides them (:func:`~opbench.kernels._lib.launch.remember`). A repeat call does
#: its allocations and launches and nothing else: ``benchmarks/reproduce/host_profile.py
#: --python-only`` measured native_layer_norm at 18-21 µs of Python per call before them.


def _vec(n: int) -> int:
    """The largest power of two dividing ``n``, at most 16: kernels take ``n // vec`` and
    multiply by the constexpr ``vec``, so Triton sees every row start aligned (an f16
    row of 1536 is loaded in 16-byte vectors; with ``N`` unspecialized it loaded one
    element per instruction)."""
    return min(16, n & -n) if n > 0 else 16


def _ln_fwd_tiles(M: int, N: int) -> tuple[bool, int, int, int]:
    """(single, BLOCK_M, BLOCK_N, num_warps) of the forward for rows of N elements."""
    block_n = next_pow2(max(N, 1))
    if block_n > MAX_ROW_BLOCK:
        return False, 1, MAX_ROW_BLOCK, warps_for(MAX_ROW_BLOCK)
    block_m = max(1, min(LN_TILE // block_n, next_pow2(max(M, 1))))
    while block_m > 1 and cdiv(M, block_m) < LN_FWD_MIN_PROGRAMS:
        block_m //= 2
    return True, block_m, block_n, warps_for(block_m * block_n)


def _ln_bwd_tiles(M: int, N: int) -> tuple[bool, int, int, int, int]:
    """(single, BLOCK_M, BLOCK_N, num_warps, programs) of the backward for M rows of N
    elements: LN_BWD_TILE-element tiles, fewer rows while that leaves fewer than
    LN_BWD_MIN_PROGRAMS tiles, at most LN_BWD_PROGRAMS programs sharing the tiles evenly
    (256 tiles: 128 programs of 2, not 132 of which 124 take 2)."""
    block_n = next_pow2(max(N, 1))
    block_m = 1
    if block_n > MAX_ROW_BLOCK:
        single, block_n = False, MAX_ROW_BLOCK
    else:
        single = True
        block_m = max(1, min(LN_BWD_TILE // block_n, next_pow2(max(M, 1))))
        while block_m > 1 and cdiv(M, block_m) < LN_BWD_MIN_PROGRAMS:
            block_m //= 2
    warps = max(4, min(16, block_m * block_n // (32 * LN_BWD_PER_THREAD)))
    n_tiles = cdiv(M, block_m)
    per_program = cdiv(n_tiles, max(1, LN_BWD_PROGRAMS))
    return single, block_m, block_n, warps, cdiv(n_tiles, per_program)


def _colsum_tiles(R: int) -> tuple[int, int]:
    """(BLOCK_R, BLOCK_C) of the column sum of R partial rows."""
    return max(1, min(next_pow2(R), COLSUM_TILE // COLSUM_BLOCK_C)), COLSUM_BLOCK_C


def _ln_split(input: torch.Tensor, normalized_shape: Sequence[int]) -> tuple[int, int, int]:
    normalized_shape = [int(s) for s in normalized_shape]
    axis = input.dim() - len(normalized_shape)
    if axis < 0 or list(input.shape[axis:]) != normalized_shape:
        raise RuntimeError(
            f"Given normalized_shape={normalized_shape}, expected input with shape "
            f"[*, {', '.join(map(str, normalized_shape))}], but got input of size"
            f"{list(input.shape)}"
        )
    N = 1
    for s in normalized_shape:
        N *= s
    M = 1
    for s in input.shape[:axis]:
        M *= s
    return axis, M, N


def _check_param(p: torch.Tensor | None, n: int, what: str) -> None:
    if p is not None and p.numel() != n:
        raise RuntimeError(f"Expected {what} to be of same shape as normalized_shape")


def _pkey(p: torch.Tensor | None) -> tuple | None:
    return None if p is None else (p.shape, p.dtype)


# key -> (stat shape, stat dtype, grid or None (no rows), M, N, constexprs)
_LN_FWD_PLANS: dict[tuple, tuple] = {}


def _ln_fwd_plan(
    key: tuple, input: torch.Tensor, normalized_shape: Sequence[int], weight: Any, bias: Any
) -> tuple:
    axis, M, N = _ln_split(input, normalized_shape)
    compute, _ = compute_types(input.dtype)
    _check_param(weight, N, "weight")
    _check_param(bias, N, "bias")
    stat_shape = tuple(input.shape[:axis]) + (1,) * (input.dim() - axis)
    sdt = stat_dtype(input, (weight, bias))
    if M == 0:
        return remember(_LN_FWD_PLANS, key, (stat_shape, sdt, None, M, N, {}))
    if N == 0:
        raise NotImplementedError("layer norm over zero elements")
    single, block_m, block_n, warps = _ln_fwd_tiles(M, N)
    vec = _vec(N)
    consts = dict(
        HAS_W=weight is not None, HAS_B=bias is not None, SINGLE=single, COMPUTE=compute,
        BLOCK_M=block_m, BLOCK_N=block_n, VEC=vec, num_warps=warps,
    )  # fmt: skip
    plan = (stat_shape, sdt, (cdiv(M, block_m),), M, N // vec, consts)
    return remember(_LN_FWD_PLANS, key, plan)


def layer_norm(
    input: torch.Tensor,
    normalized_shape: Sequence[int],
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """aten::native_layer_norm: (out, mean, rstd)."""
    dev = input.device
    key = (input.shape, input.dtype, dev, tuple(normalized_shape), _pkey(weight), _pkey(bias))
    plan = _LN_FWD_PLANS.get(key)
    if plan is None:
        plan = _ln_fwd_plan(key, input, normalized_shape, weight, bias)
    stat_shape, sdt, grid, M, NV, consts = plan
    y = torch.empty(input.shape, dtype=input.dtype, device=dev)
    mean = torch.empty(stat_shape, dtype=sdt, device=dev)
    rstd = torch.empty(stat_shape, dtype=sdt, device=dev)
    if grid is None:
        return y, mean, rstd
    x = input.contiguous()
    w = weight.contiguous() if weight is not None else x
    b = bias.contiguous() if bias is not None else x
    _ln_fwd(grid, (x, w, b, y, mean, rstd, M, NV, float(eps)), **consts)
    return y, mean, rstd


# key -> (want_dx, want_dw, want_db, run: False where no launch, bwd grid, bwd ints,
# bwd constexprs, partial-sum buffer elements, colsum grid, colsum ints, colsum
# constexprs, buffer dtype)
_LN_BWD_PLANS: dict[tuple, tuple] = {}


def _ln_bwd_plan(
    key: tuple,
    input: torch.Tensor,
    normalized_shape: Sequence[int],
    weight: Any,
    bias: Any,
    output_mask: Sequence[bool],
) -> tuple:
    axis, M, N = _ln_split(input, normalized_shape)
    compute, buf_dtype = compute_types(input.dtype)
    want_dx, want_dw, want_db = (bool(m) for m in output_mask)
    if (want_dw and weight is None) or (want_db and bias is None):
        raise RuntimeError("tensor does not have a device")  # eager's message
    _check_param(weight, N, "weight")
    run = (want_dx or want_dw or want_db) and M != 0 and N != 0
    if not run:
        plan: tuple = (want_dx, want_dw, want_db, False, None, (), {}, 0, None, (), {}, buf_dtype)
        return remember(_LN_BWD_PLANS, key, plan)
    single, block_m, block_n, warps, n_programs = _ln_bwd_tiles(M, N)
    vec = _vec(N)
    consts = dict(
        HAS_W=weight is not None, DX=want_dx, DW=want_dw, DB=want_db, SINGLE=single,
        COMPUTE=compute, BLOCK_M=block_m, BLOCK_N=block_n, VEC=vec,
        EVEN_M=M % block_m == 0, EVEN_N=N == block_n, STAGES=LN_BWD_STAGES, num_warps=warps,
    )  # fmt: skip
    ints = (M, N // vec, cdiv(M, block_m), n_programs, n_programs if want_dw else 0)
    grads = want_dw + want_db
    block_r, block_c = _colsum_tiles(n_programs)
    colsum = dict(VEC=vec, COMPUTE=compute, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=4)
    plan = (
        want_dx, want_dw, want_db, True, (n_programs,), ints, consts, grads * n_programs * N,
        (cdiv(N, block_c), grads), (n_programs, N // vec), colsum, buf_dtype,
    )  # fmt: skip
    return remember(_LN_BWD_PLANS, key, plan)


def layer_norm_backward(
    grad_out: torch.Tensor,
    input: torch.Tensor,
    normalized_shape: Sequence[int],
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    output_mask: Sequence[bool],
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """aten::native_layer_norm_backward: (grad_input, grad_weight, grad_bias), None where
    ``output_mask`` is False.

    Two launches (the row kernel and one column sum of both gradients' partials, none
    when only grad_input is asked) and one scratch buffer holding both partials."""
    dev = input.device
    key = (
        input.shape, input.dtype, dev, tuple(normalized_shape), _pkey(weight), _pkey(bias),
        tuple(output_mask),
    )  # fmt: skip
    plan = _LN_BWD_PLANS.get(key)
    if plan is None:
        plan = _ln_bwd_plan(key, input, normalized_shape, weight, bias, output_mask)
    want_dx, want_dw, want_db, run, grid, ints, consts, part_numel, cgrid, cints, cconsts, bdt = (
        plan
    )
    dx = torch.empty(input.shape, dtype=input.dtype, device=dev) if want_dx else None
    if not run:
        if not (want_dx or want_dw or want_db):
            return None, None, None
        # no rows or no columns: zero parameter gradients
        dw = torch.zeros(weight.shape, dtype=weight.dtype, device=dev) if want_dw else None
        db = torch.zeros(bias.shape, dtype=bias.dtype, device=dev) if want_db else None
        return dx, dw, db
    dw = torch.empty(weight.shape, dtype=weight.dtype, device=dev) if want_dw else None
    db = torch.empty(bias.shape, dtype=bias.dtype, device=dev) if want_db else None
    x = input.contiguous()
    part = torch.empty(part_numel, dtype=bdt, device=dev) if part_numel else x
    _ln_bwd(
        grid,
        (grad_out.contiguous(), x, weight.contiguous() if weight is not None else x,
         mean.contiguous(), rstd.contiguous(), dx if dx is not None else x, part, *ints),
        **consts,
    )  # fmt: skip
    if part_numel:
        dst = dw if dw is not None else db
        _colsum(cgrid, (part, dst, db if db is not None else dst, *cints), **cconsts)
    return dx, dw, db


# the gate repeats these functions' launches (native_launch.declare_replay)
declare_replay(layer_norm, layer_norm_backward)
