"""The matmul family (mm, bmm, addmm, baddbmm) against eager PyTorch and a float64
reference on CPU (Triton's interpreter): f32, f16, bf16; sizes that are and are not
multiples of the tile, zero-size and K == 0; transposed, sliced and batch-permuted
operands read in place; every bias shape addmm broadcasts, alpha/beta, beta == 0 over a
NaN bias; eager's errors; float64 and integers declined so PyTorch serves them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import DEVICE, assert_matches  # noqa: E402

from opbench.kernels._lib import matmul, matmul_pointer  # noqa: E402

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SIZES = [(1, 1, 1), (5, 7, 3), (33, 65, 17), (64, 32, 64), (0, 4, 3), (3, 0, 4), (4, 5, 0)]


def _r(*shape: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(DEVICE, dtype)


def _matrix(rows: int, cols: int, layout: str, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """A ``rows x cols`` operand: ``contiguous``, ``transposed`` (column-major view) or
    ``sliced`` (every other column of a wider matrix)."""
    if layout == "transposed":
        return _r(cols, rows, dtype=dtype, seed=seed).t()
    if layout == "sliced":
        return _r(rows, 2 * cols, dtype=dtype, seed=seed)[:, ::2]
    return _r(rows, cols, dtype=dtype, seed=seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
def test_mm_sizes(size: tuple[int, int, int], dtype: torch.dtype) -> None:
    M, K, N = size
    a, b = _r(M, K, dtype=dtype, seed=1), _r(K, N, dtype=dtype, seed=2)
    got = matmul.mm(a, b)
    assert got.shape == (M, N) and got.dtype == dtype and got.is_contiguous()
    assert_matches(got, aten.mm, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("la", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("lb", ["contiguous", "transposed", "sliced"])
def test_mm_strided_operands_read_in_place(la: str, lb: str, dtype: torch.dtype) -> None:
    a = _matrix(37, 45, la, dtype, seed=3)
    b = _matrix(45, 29, lb, dtype, seed=4)
    assert_matches(matmul.mm(a, b), aten.mm, a, b)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("la", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("lb", ["contiguous", "transposed", "sliced"])
def test_mm_aligned_operands_take_the_vector_layouts(la: str, lb: str, dtype: torch.dtype) -> None:
    """Sizes and strides that are multiples of 16 bytes: the launcher hands the kernel
    each operand's layout (rows or columns contiguous) and its strides divided by the
    vector width, which the kernel multiplies back."""
    a = _matrix(48, 64, la, dtype, seed=30)
    b = _matrix(64, 40, lb, dtype, seed=31)
    vec = 16 // a.element_size()
    if la != "sliced":
        assert matmul_pointer.layout_of(a.unsqueeze(0), vec)[:2] == (
            matmul_pointer.ROW if la == "contiguous" else matmul_pointer.COL, vec)  # fmt: skip
    assert_matches(matmul.mm(a, b), aten.mm, a, b)


def test_a_launch_plan_per_alignment_and_bias_layout(monkeypatch) -> None:
    """``matmul_into`` plans a launch once per call signature: the same sizes and strides
    at an address that is not 16-byte aligned, or with a bias of another layout, are
    other signatures (a plan made for an aligned operand would let the compiled kernel
    assume 16-byte loads there); each call still matches eager."""
    monkeypatch.setattr(matmul, "_MM_PLANS", {})
    store = _r(1, 33 * 64 + 8, dtype=torch.float16, seed=40)
    aligned = store[0, : 33 * 64].view(1, 33, 64)
    shifted = store[0, 1 : 33 * 64 + 1].view(1, 33, 64)  # 2 bytes past 16-byte alignment
    b = _r(1, 64, 24, dtype=torch.float16, seed=41)
    row, col = _r(24, dtype=torch.float16, seed=42), _r(33, 1, dtype=torch.float16, seed=43)
    for a, bias in ((aligned, None), (shifted, None), (aligned, row), (aligned, col),
                    (aligned, None)):  # fmt: skip
        out = torch.empty(1, 33, 24, dtype=torch.float16, device=DEVICE)
        x = None if bias is None else bias.expand(1, 33, 24)
        matmul.matmul_into(out, a, b, x)
        want = torch.baddbmm if x is not None else (lambda _, p, q: torch.bmm(p, q))
        assert_matches(out, want, torch.zeros(1, 33, 24) if x is None else x, a, b)
    plans = list(matmul._MM_PLANS.values())
    assert len(plans) == 4  # the last call reused the first plan
    assert {p[3]["DA"] for p in plans[:2]} == {8, 1}  # aligned: 8 halves a vector
    assert [p[3]["BIAS_MODE"] for p in plans[2:]] == [1, 2]


@pytest.mark.slow  # cases over 3 s together on 2 cores (2026-11-28, --durations)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_split_k_on_long_reductions(dtype: torch.dtype) -> None:
    """Few output tiles over a long K: the reduction is cut into programs whose fp32
    partials a second kernel sums in a fixed order, then applies alpha, beta and bias."""
    M, K, N = 8, 2000, 20
    assert matmul.split_k(1, 63, 4) > 1
    a, b = _r(M, K, dtype=dtype, seed=32), _r(K, N, dtype=dtype, seed=33)
    assert_matches(matmul.mm(a, b), aten.mm, a, b)
    assert_matches(matmul.mm(b.t(), a.t()), aten.mm, b.t(), a.t())
    x = _r(N, dtype=dtype, seed=34)
    got = matmul.addmm(x, a, b, alpha=0.5, beta=2.0)
    assert_matches(got, aten.addmm, x, a, b, alpha=0.5, beta=2.0)
    b1, b2 = _r(2, 9, 700, dtype=dtype, seed=35), _r(2, 700, 5, dtype=dtype, seed=36)
    assert_matches(matmul.bmm(b1, b2), aten.bmm, b1, b2)
    c = _r(2, 9, 5, dtype=dtype, seed=37).transpose(1, 2).contiguous().transpose(1, 2)
    got = matmul.baddbmm(c, b1, b2, alpha=-1, beta=0.5)
    assert_matches(got, aten.baddbmm, c, b1, b2, alpha=-1, beta=0.5)


def test_split_k_only_where_the_gpu_would_sit_idle() -> None:
    assert matmul.split_k(tiles=132, k_iters=1000, sms=132) == 1  # the tiles fill it
    assert matmul.split_k(tiles=1, k_iters=10, sms=132) == 1  # K too short to share
    assert matmul.split_k(tiles=1, k_iters=10368, sms=132) == 128  # capped
    assert matmul.split_k(tiles=4, k_iters=64, sms=132) == 8  # >= 8 K blocks each


def test_split_k_in_whole_waves(monkeypatch) -> None:
    """``SPLIT_WHOLE_WAVES``: the split grid stays within two programs an SM (36 tiles on
    132 SMs: 7 ways, 252 programs, not 8 ways and 288); off, it reaches past them."""
    monkeypatch.setattr(matmul, "SPLIT_WHOLE_WAVES", False)
    assert matmul.split_k(tiles=36, k_iters=196, sms=132) == 8
    monkeypatch.setattr(matmul, "SPLIT_WHOLE_WAVES", True)
    assert matmul.split_k(tiles=36, k_iters=196, sms=132) == 7
    assert matmul.split_k(tiles=4, k_iters=64, sms=132) == 8  # K's 8 blocks a piece still bind
    assert matmul.split_k(tiles=66, k_iters=1000, sms=132) == 4  # 264 programs: whole already
    for tiles in range(1, 67):
        assert tiles * matmul.split_k(tiles, 10**6, 132) <= 2 * 132


def test_whole_wave_splits_give_eagers_result(monkeypatch) -> None:
    """Under the setting and without it, a split product sums to eager's, each through a
    plan of its own split (the plan keyed by the setting: one made before does not serve
    it): 4 tiles of 32 x 32 on 11 SMs over 63 K blocks split 6 ways, 5 in whole waves."""
    monkeypatch.setattr(matmul, "sm_count", lambda device: 11)
    monkeypatch.setattr(matmul, "_MM_PLANS", {})
    a, b = _r(64, 2000, dtype=torch.float32, seed=41), _r(2000, 64, dtype=torch.float32, seed=42)
    for whole, splits in ((False, 6), (True, 5)):
        monkeypatch.setattr(matmul, "SPLIT_WHOLE_WAVES", whole)
        assert_matches(matmul.mm(a, b), aten.mm, a, b)
        used = [plan[1] for key, plan in matmul._MM_PLANS.items() if key[-1] == whole]
        assert used == [splits], (whole, used)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bmm_with_batch_strides(dtype: torch.dtype) -> None:
    a = _r(3, 19, 40, dtype=dtype, seed=5)
    b = _r(3, 40, 21, dtype=dtype, seed=6)
    assert_matches(matmul.bmm(a, b), aten.bmm, a, b)
    # batch not outermost in memory (attention's [B, H] folded as a permutation)
    a2 = _r(19, 3, 40, dtype=dtype, seed=7).permute(1, 0, 2)
    b2 = _r(21, 40, 3, dtype=dtype, seed=8).permute(2, 1, 0)
    assert_matches(matmul.bmm(a2, b2), aten.bmm, a2, b2)
    # a stride-0 (expanded) batch of one matrix
    b3 = _r(1, 40, 21, dtype=dtype, seed=9).expand(3, 40, 21)
    assert_matches(matmul.bmm(a, b3), aten.bmm, a, b3)
    empty = _r(0, 4, 5, dtype=dtype, seed=1), _r(0, 5, 2, dtype=dtype, seed=2)
    assert_matches(matmul.bmm(*empty), aten.bmm, *empty)


BIASES = {
    "row": lambda M, N, dt: _r(N, dtype=dt, seed=10),
    "full": lambda M, N, dt: _r(M, N, dtype=dt, seed=11),
    "one_row": lambda M, N, dt: _r(1, N, dtype=dt, seed=12),
    "column": lambda M, N, dt: _r(M, 1, dtype=dt, seed=13),
    "scalar": lambda M, N, dt: _r(dtype=dt, seed=14),
    "transposed": lambda M, N, dt: _r(N, M, dtype=dt, seed=15).t(),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("bias", list(BIASES))
def test_addmm_bias_shapes(bias: str, dtype: torch.dtype) -> None:
    M, K, N = 35, 50, 33
    x = BIASES[bias](M, N, dtype)
    a, b = _r(M, K, dtype=dtype, seed=16), _r(K, N, dtype=dtype, seed=17)
    assert_matches(matmul.addmm(x, a, b), aten.addmm, x, a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_addmm_alpha_beta(dtype: torch.dtype) -> None:
    a, b = _r(20, 30, dtype=dtype, seed=18), _r(30, 10, dtype=dtype, seed=19)
    x = _r(10, dtype=dtype, seed=20)
    for alpha, beta in [(0.5, 2.0), (2, 1), (1, -1.5), (0, 1)]:
        got = matmul.addmm(x, a, b, alpha=alpha, beta=beta)
        assert_matches(got, aten.addmm, x, a, b, alpha=alpha, beta=beta)
    # beta == 0 ignores the bias: NaN and Inf in it do not reach the result
    bad = torch.tensor([float("nan"), float("inf")] * 5, dtype=dtype, device=DEVICE)
    got = matmul.addmm(bad, a, b, beta=0)
    assert torch.isfinite(got).all()
    assert_matches(got, aten.addmm, bad, a, b, beta=0)
    # K == 0: beta * bias
    e1, e2 = _r(20, 0, dtype=dtype, seed=1), _r(0, 10, dtype=dtype, seed=2)
    assert_matches(matmul.addmm(x, e1, e2, beta=3), aten.addmm, x, e1, e2, beta=3)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_baddbmm(dtype: torch.dtype) -> None:
    b1, b2 = _r(2, 17, 24, dtype=dtype, seed=21), _r(2, 24, 9, dtype=dtype, seed=22)
    for x in (_r(9, dtype=dtype, seed=23), _r(2, 17, 9, dtype=dtype, seed=24)):
        got = matmul.baddbmm(x, b1, b2, alpha=0.25, beta=0.5)
        assert_matches(got, aten.baddbmm, x, b1, b2, alpha=0.25, beta=0.5)


@pytest.mark.filterwarnings("ignore:invalid value encountered in matmul:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning")
def test_nan_and_inf_propagate() -> None:
    a = _r(8, 8, dtype=torch.float32, seed=25)
    b = _r(8, 8, dtype=torch.float32, seed=26)
    a[1, 2], a[3, 4], b[5, 6] = float("nan"), float("inf"), float("-inf")
    assert_matches(matmul.mm(a, b), aten.mm, a, b)
    # Inf met in a later K block than the first: float32's compensated sum keeps it Inf
    a = _r(6, 100, dtype=torch.float32, seed=27).abs()
    b = _r(100, 5, dtype=torch.float32, seed=28).abs()
    a[2, 70] = float("inf")
    got = matmul.mm(a, b)
    assert torch.isinf(got[2]).all() and torch.isfinite(got[[0, 1, 3, 4, 5]]).all()
    assert_matches(got, aten.mm, a, b)


@pytest.mark.parametrize(
    ("op", "args"),
    [
        ("mm", (torch.randn(2, 4), torch.randn(5, 3))),
        ("mm", (torch.randn(2, 4).half(), torch.randn(4, 3))),
        ("mm", (torch.randn(2, 4, 1), torch.randn(4, 3))),
        ("bmm", (torch.randn(2, 2, 4), torch.randn(3, 4, 3))),
        ("bmm", (torch.randn(2, 2, 4), torch.randn(2, 4, 3).half())),
        ("addmm", (torch.randn(3), torch.randn(2, 4).half(), torch.randn(4, 3).half())),
        ("addmm", (torch.randn(4), torch.randn(2, 4), torch.randn(4, 3))),
        ("baddbmm", (torch.randn(3), torch.randn(2, 2, 4).half(), torch.randn(2, 4, 3).half())),
    ],
)
def test_errors_as_eager(op: str, args: tuple) -> None:
    with pytest.raises(RuntimeError) as eager:
        getattr(aten, op)(*args)
    with pytest.raises(RuntimeError) as ours:
        getattr(matmul, op)(*args)
    assert str(ours.value) == str(eager.value)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.complex64], ids=str)
def test_unserved_dtypes_are_declined(dtype: torch.dtype) -> None:
    a = torch.ones(3, 3, dtype=dtype)
    with pytest.raises(NotImplementedError):
        matmul.mm(a, a)


def test_buckets_and_configs() -> None:
    """Every configuration a bucket can get is one tl.dot accepts (tiles of at least 16)."""
    assert matmul.bucket(2, 4096, 4096, 512) == "2:4:4:2"
    assert matmul.bucket(2, 1024, 1024, 1024) == "2:3:3:3"
    assert matmul.bucket(2, 256, 1024, 1024) == "2:2:3:3"
    assert matmul.bucket(4, 1, 33, 129) == "4:0:1:2"
    assert matmul.bucket(4, 32, 128, 4097) == "4:0:1:5"
    for itemsize in (2, 4):
        for M in (1, 17, 100, 1000, 5000):
            for N in (1, 17, 100, 1000, 5000):
                bm, bn, bk, group, warps, stages = matmul._default(itemsize, M, N)
                assert min(bm, bn, bk) >= 16 and group >= 1 and warps in (2, 4, 8)
    for cfg in matmul.CONFIGS.values():
        assert min(cfg[:3]) >= 16


@pytest.mark.slow
@pytest.mark.skipif(
    DEVICE != "cpu",
    reason="an interpreter test; on the H100 machine "
    "Triton 3.6's interpreter with its numpy cannot range over a runtime "
    "integer (int() of a 1-element array), a limit of that pairing",
)
def test_kernels_run_when_triton_was_imported_first() -> None:
    """opbench's CPU workers may import Triton before TRITON_INTERPRET is set: the matmul
    and convolution kernels must not call triton.language's own @jit helpers (tl.zeros,
    tl.cdiv), which are then compiled-mode objects the interpreter cannot call."""
    code = (
        "import triton.language, os\n"
        "os.environ['TRITON_INTERPRET'] = '1'\n"
        "import torch\n"
        "from opbench.kernels._lib import conv, matmul\n"
        "a, b = torch.randn(5, 7), torch.randn(7, 3)\n"
        "torch.testing.assert_close(matmul.mm(a, b), a @ b)\n"
        "x, w = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3)\n"
        "args = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)\n"
        "torch.testing.assert_close(conv.convolution(*args), torch.ops.aten.convolution(*args))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=300)


def test_each_bias_shape_takes_its_read_mode() -> None:
    """test_addmm_bias_shapes covers every way the kernel reads a bias: a row vector
    loaded once per tile (``[N]``, ``[1, N]``, a scalar), a column vector (``[M, 1]``), a
    matrix with contiguous rows and one with general strides."""
    M, N = 35, 33
    want = {"row": 1, "one_row": 1, "scalar": 1, "column": 2, "full": 3, "transposed": 0}
    for name, mode in want.items():
        x = BIASES[name](M, N, torch.float32).expand(M, N).unsqueeze(0)
        assert matmul.bias_mode(x.stride()) == mode, name


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_config_can_name_the_split(dtype: torch.dtype) -> None:
    """A seventh value in a configuration is the number of programs along K, whatever
    split_k would choose (also 1: no split where it would split)."""
    M, K, N = 21, 200, 18
    a, b = _r(M, K, dtype=dtype, seed=40), _r(K, N, dtype=dtype, seed=41)
    x = _r(N, dtype=dtype, seed=42)
    assert matmul.split_plan(1, 40, torch.device("cpu"), 3) == (3, 14)
    assert matmul.split_plan(1, 40, torch.device("cpu"), 1) == (1, 40)
    assert matmul.split_plan(1, 40, torch.device("cpu")) == (5, 8)  # split_k's own choice
    for splits in (1, 3, 7):
        out = torch.empty(M, N, dtype=dtype, device=DEVICE)
        cfg = (16, 16, 16, 4, 4, 1, splits)
        matmul.matmul_into(out.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0),
                           x.expand(M, N).unsqueeze(0), 0.5, 2.0, cfg)  # fmt: skip
        assert_matches(out, aten.addmm, x, a, b, alpha=0.5, beta=2.0)
