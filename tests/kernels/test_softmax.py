"""The softmax family (``_softmax``, ``_log_softmax`` and their backward ops) against
eager PyTorch on CPU (Triton's interpreter): f32, f16 and bf16, every dim of contiguous,
transposed and sliced inputs, rows longer than one tile (the two-pass path), ``-inf``
and NaN rows, 0-dim and empty inputs, ``half_to_float`` and the ``out=`` overloads,
checked as the judge checks them (against eager and a float64 reference)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

import triton.language as tl  # noqa: E402
from kernel_checks import DEVICE, assert_matches, sample_input  # noqa: E402

from opbench.kernels._lib import softmax as sm  # noqa: E402
from opbench.kernels._lib import softmax_long  # noqa: E402

aten = torch.ops.aten
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


LAYOUTS = ["contiguous", "transposed", "sliced", "4d"]


def _grad_and_output(x: torch.Tensor, dim: int, log: bool) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    grad = torch.randn(x.shape, generator=g).to(x.device, x.dtype)
    fwd = aten._log_softmax if log else aten._softmax
    return grad, fwd(x, dim, False)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_forward_every_dim(layout: str, dtype: torch.dtype) -> None:
    x = sample_input(layout, dtype)
    for dim in range(-x.dim(), x.dim()):
        assert_matches(sm.softmax(x, dim, False), aten._softmax, x, dim, False)
        assert_matches(sm.log_softmax(x, dim, False), aten._log_softmax, x, dim, False)


#: Failed on the H100 (first compiled run of these tests, 2026-11-25): f16/bf16 backward
#: results up to ~14 ulps from CUDA eager's on the sample inputs (eager exact there).
#: The cause read from ATen since: CUDA eager rounds ``grad * output`` to the dtype first
#: (``_rounds_product``, tested below against the formula); not yet run on a GPU, so the
#: mark stays, not strict: the fix shows as XPASS there.
_CUDA_HALF_BACKWARD = pytest.mark.xfail(
    DEVICE != "cpu", reason="f16/bf16 softmax backward rounding vs CUDA eager", strict=False
)


@pytest.mark.parametrize(
    "dtype",
    [torch.float32, *(pytest.param(d, marks=_CUDA_HALF_BACKWARD) for d in DTYPES[1:])],
    ids=str,
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_backward_every_dim(layout: str, dtype: torch.dtype) -> None:
    x = sample_input(layout, dtype)
    for dim in range(x.dim()):
        for log, ours, ref in (
            (False, sm.softmax_backward_data, aten._softmax_backward_data),
            (True, sm.log_softmax_backward_data, aten._log_softmax_backward_data),
        ):
            grad, out = _grad_and_output(x, dim, log)
            assert_matches(ours(grad, out, dim, dtype), ref, grad, out, dim, dtype)
            # a transposed grad beside a contiguous output
            gt = grad.transpose(0, -1).contiguous().transpose(0, -1)
            assert_matches(ours(gt, out, dim, dtype), ref, gt, out, dim, dtype)


@pytest.mark.parametrize(
    # 0.5-1.2 s a dtype, 2.0-3.3 s together (2026-11-28, --durations): float32 by default
    "dtype",
    [torch.float32, *(pytest.param(d, marks=pytest.mark.slow) for d in DTYPES[1:])],
    ids=str,
)
def test_long_rows_two_pass(dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows longer than one tile take the online (two-pass) path, including rows whose
    first tiles are all -inf."""
    if DEVICE != "cpu":
        pytest.skip("patches INTERP_MAX_WIDTH, which only the interpreter's plans read")
    monkeypatch.setattr(sm, "INTERP_MAX_WIDTH", 64)
    x = (torch.randn(4, 300) * 3).to(DEVICE, dtype)
    x[1, :150] = -float("inf")
    x[3, 200:] = -float("inf")
    for t, dim in ((x, 1), (x.t(), 0), (x.t().contiguous().t(), 1)):
        assert_matches(sm.softmax(t, dim, False), aten._softmax, t, dim, False)
        assert_matches(sm.log_softmax(t, dim, False), aten._log_softmax, t, dim, False)
    y = aten._softmax(x, 1, False)
    grad = torch.randn(x.shape).to(DEVICE, dtype)
    assert_matches(sm.softmax_backward_data(grad, y, 1, dtype), aten._softmax_backward_data,
                   grad, y, 1, dtype)  # fmt: skip
    ly = aten._log_softmax(x, 1, False)
    assert_matches(sm.log_softmax_backward_data(grad, ly, 1, dtype),
                   aten._log_softmax_backward_data, grad, ly, 1, dtype)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [*DTYPES, torch.float64], ids=str)
def test_long_rows_any_alignment(dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """The long-row kernels split a row into a head up to the first 16-byte boundary,
    an aligned body and a tail: rows of odd length (every row at another alignment),
    sliced rows, a row shorter than one head, an output (or a grad) whose rows sit at
    other offsets than the input's (element loads), half_to_float; forward and
    backward."""
    if DEVICE != "cpu":
        pytest.skip("patches INTERP_MAX_WIDTH, which only the interpreter's plans read")
    monkeypatch.setattr(sm, "INTERP_MAX_WIDTH", 32)
    monkeypatch.setattr(sm, "_LAUNCHES", {})
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(5, 301, generator=g) * 3).to(DEVICE, dtype)
    x[2, 7:] = -float("inf")
    x[4, :] = -float("inf")
    for t in (x, x[:, 3:290], x[1:, 5:], torch.randn(6, 38, generator=g).to(DEVICE, dtype)[:, 1:]):
        assert_matches(sm.softmax(t, 1, False), aten._softmax, t, 1, False)
        assert_matches(sm.log_softmax(t, -1, False), aten._log_softmax, t, -1, False)
    out = torch.empty(5, 304, device=DEVICE, dtype=dtype)[:, 1:302]  # rows at other offsets
    assert sm.log_softmax_out(x, 1, False, out=out) is out
    assert_matches(out, aten._log_softmax, x, 1, False)
    y, ly = aten._softmax(x, 1, False), aten._log_softmax(x, 1, False)
    grad = torch.randn(5, 301, generator=g).to(DEVICE, dtype)
    for gr in (grad, torch.randn(5, 310, generator=g).to(DEVICE, dtype)[:, 2:303]):
        assert_matches(sm.softmax_backward_data(gr, y, 1, dtype), aten._softmax_backward_data,
                       gr, y, 1, dtype)  # fmt: skip
        assert_matches(sm.log_softmax_backward_data(gr, ly, 1, dtype),
                       aten._log_softmax_backward_data, gr, ly, 1, dtype)  # fmt: skip
    nan = x.clone()
    nan[0, 100] = float("nan")
    got = sm.softmax(nan, 1, False)
    assert got[0].isnan().all() and not got[1].isnan().any()
    if dtype == torch.float16:
        got = sm.softmax(x[:, 1:], 1, True)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, aten._softmax(x[:, 1:].float(), 1, False),
                                   atol=1e-6, rtol=1e-5, equal_nan=True)  # fmt: skip


def _small_gpu_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan as on the GPU, scaled down so the interpreter runs it (skips off the CPU)."""
    if DEVICE != "cpu":
        pytest.skip("patches the interpreter's plan switch")
    monkeypatch.setattr(sm, "_INTERPRETING", False)
    monkeypatch.setattr(sm, "_LAUNCHES", {})
    monkeypatch.setattr(sm, "SINGLE_MAX", 64)
    monkeypatch.setattr(sm, "RESIDENT_THREADS", 8)
    monkeypatch.setattr(sm, "MIN_PROGRAMS", 4)


def test_gpu_plans_under_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU's plans (several rows a program, warps, the long-row kernel's tiles), run
    at small scale through the interpreter."""
    _small_gpu_plans(monkeypatch)
    monkeypatch.setattr(softmax_long, "LONG_TILE_BYTES", 128)
    g = torch.Generator().manual_seed(5)
    for dtype in (torch.float16, torch.float32):
        for shape in ((3, 40, 24), (7, 64), (2, 3, 100), (9, 5)):
            x = (torch.randn(*shape, generator=g) * 3).to(DEVICE, dtype)
            assert_matches(sm.softmax(x, -1, False), aten._softmax, x, -1, False)
            assert_matches(sm.log_softmax(x, -1, False), aten._log_softmax, x, -1, False)
            assert_matches(sm.softmax(x, 0, False), aten._softmax, x, 0, False)


@pytest.mark.slow
@pytest.mark.parametrize("vecs, persist", [(1, 0), (2, 0), (4, 0), (2, 2), (1, 3)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_backward_gpu_row_plans_under_the_interpreter(
    vecs: int, persist: int, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backward's GPU row tiles (:func:`softmax._row_tiling` with ``bwd``: several rows
    a program, one to ``BWD_MAX_VECS`` vectors a thread, the row length passed divided by
    the vector; with ``BWD_PERSIST``, ``persist`` programs looping over the tiles, on one
    SM) at small scale through the interpreter: rows a multiple of the vector and not
    (VEC_N 1), fewer rows than a tile, a row of one element, a grad at other strides than
    the output, sliced rows (a row stride the vector does not divide), both formulas and
    the CUDA rounding of ``grad * output`` forced on."""
    _small_gpu_plans(monkeypatch)
    monkeypatch.setattr(sm, "BWD_MAX_VECS", vecs)
    monkeypatch.setattr(sm, "BWD_PERSIST", persist)
    monkeypatch.setattr(sm, "_sms", lambda t: 1)
    g = torch.Generator().manual_seed(11)
    for shape in ((3, 40, 24), (7, 64), (5, 8), (9, 5), (4, 1), (2, 3, 56)):
        x = (torch.randn(*shape, generator=g) * 3).to(DEVICE, dtype)
        grad = torch.randn(*shape, generator=g).to(DEVICE, dtype)
        wide = torch.randn(*shape[:-1], shape[-1] + 3, generator=g).to(DEVICE, dtype)
        for gr in (
            grad,
            wide[..., 1 : shape[-1] + 1],
            grad.transpose(0, -1).contiguous().transpose(0, -1),
        ):
            y, ly = aten._softmax(x, -1, False), aten._log_softmax(x, -1, False)
            assert_matches(sm.softmax_backward_data(gr, y, -1, dtype),
                           aten._softmax_backward_data, gr, y, -1, dtype)  # fmt: skip
            assert_matches(sm.log_softmax_backward_data(gr, ly, -1, dtype),
                           aten._log_softmax_backward_data, gr, ly, -1, dtype)  # fmt: skip
    if dtype != torch.float16:
        return
    monkeypatch.setattr(sm, "_rounds_product", lambda grad, log: not log)
    monkeypatch.setattr(sm, "_LAUNCHES", {})
    x = torch.randn(6, 40, generator=g).to(DEVICE, dtype)
    out = aten._softmax(x, 1, False)
    grad = (1 + 0.01 * torch.randn(6, 40, generator=g)).to(DEVICE, dtype)
    got = sm.softmax_backward_data(grad, out, 1, dtype)
    torch.testing.assert_close(got.float(), _cuda_eager_softmax_backward(grad, out, 1).float(),
                               atol=1e-6, rtol=4e-3)  # fmt: skip


def test_backward_launch_of_the_traced_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU launch of the traced contiguous-row backward cases: the row's power-of-2
    tile with no masked half (rows of 512 took 1,024-wide tiles, rows of 128 256-wide),
    the row length passed divided by the vector (``VEC_N``: 16-byte loads; it was a
    plain runtime integer and every element was loaded alone), int32 indices, at least
    MIN_PROGRAMS programs where the rows allow (the f32 case had 128 on 132 SMs)."""
    monkeypatch.setattr(sm, "_INTERPRETING", False)
    cases = {
        # shape, dtype, log: (grid, BLOCK_M, BLOCK_N, VEC_N, num_warps)
        ((1, 24, 512, 512), torch.float16, False): (3072, 4, 512, 8, 4),
        ((128, 128, 128), torch.float16, False): (1024, 16, 128, 8, 4),
        ((32, 128, 128), torch.float16, False): (512, 8, 128, 8, 4),
        ((1, 16, 128, 128), torch.float32, False): (512, 4, 128, 4, 4),
        ((128, 1000), torch.float16, True): (128, 1, 1024, 8, 4),
        ((16, 4096), torch.float32, True): (16, 1, 4096, 4, 8),
    }
    for (shape, dtype, log), want in cases.items():
        t = torch.empty(shape, dtype=dtype, device="meta")
        dim = len(shape) - 1
        plan = sm._plan([t, t, t], dim, True)
        assert plan is not None
        _, grid, ints, consts = sm._launch_args(plan, [t, t], t, dim, log, True)
        got = (grid[0], consts["BLOCK_M"], consts["BLOCK_N"], consts["VEC_N"], consts["num_warps"])
        assert got == want, shape
        assert ints[1] == shape[-1] // consts["VEC_N"] and consts["SINGLE"]
        assert consts["IDX"] == tl.int32
        assert consts["LOOP"] == 0
    # a row the vector does not divide: element loads, the length as is
    t = torch.empty(64, 1001, dtype=torch.float16, device="meta")
    _, _, ints, consts = sm._launch_args(sm._plan([t, t, t], 1, True), [t, t], t, 1, False, True)
    assert consts["VEC_N"] == 1 and ints[1] == 1001
    # BWD_PERSIST: at most that many looping programs an SM (132 on the CPU's plans),
    # where there are more tiles than that; fewer keep one tile a program
    monkeypatch.setattr(sm, "BWD_PERSIST", 4)
    monkeypatch.setattr(sm, "BWD_STAGES", 3)
    for shape, want in (((1, 24, 512, 512), (528, 3)), ((32, 128, 128), (512, 0))):
        t = torch.empty(shape, dtype=torch.float16, device="meta")
        plan = sm._plan([t, t, t], len(shape) - 1, True)
        _, grid, _, consts = sm._launch_args(plan, [t, t], t, len(shape) - 1, False, True)
        assert (grid[0], consts["LOOP"]) == want


def test_row_tiling_of_the_traced_shapes() -> None:
    """``(BLOCK_M, BLOCK_N, num_warps)`` for the traced contiguous-row cases: a power-of-2
    row, one to four 16-byte vectors a thread, at least MIN_PROGRAMS programs where the
    rows allow."""
    assert sm._row_tiling(128 * 128, 128, 2) == (16, 128, 4)  # [128,128,128] f16
    assert sm._row_tiling(32 * 128, 128, 2) == (8, 128, 4)  # [32,128,128] f16
    assert sm._row_tiling(16 * 128, 128, 4) == (4, 128, 4)  # [1,16,128,128] f32
    assert sm._row_tiling(24 * 512, 512, 2) == (8, 512, 4)  # [1,24,512,512] f16
    assert sm._row_tiling(128, 1000, 2) == (1, 1024, 4)  # [128,1000] f16
    assert sm._row_tiling(16, 4096, 4) == (1, 4096, 8)
    # the backward: at most BWD_MAX_VECS (2) vectors of each input a thread
    assert sm._row_tiling(24 * 512, 512, 2, bwd=True) == (4, 512, 4)
    assert sm._row_tiling(128 * 128, 128, 2, bwd=True) == (16, 128, 4)


@pytest.mark.parametrize("two_pass", [False, True])
def test_special_values(two_pass: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if two_pass:
        if DEVICE != "cpu":
            pytest.skip("patches INTERP_MAX_WIDTH, which only the interpreter's plans read")
        monkeypatch.setattr(sm, "INTERP_MAX_WIDTH", 2)
    x = torch.randn(6, 5).to(DEVICE)
    x[0, :] = -float("inf")  # all -inf: NaN, as eager
    x[1, 2] = float("nan")  # NaN anywhere: the row is NaN
    x[2, 3] = float("inf")  # +inf: NaN, as eager
    x[3, 1:] = -float("inf")  # one finite: 1 there, 0 elsewhere
    x[4, :] = 1e4  # large equal values
    for fn, ref in ((sm.softmax, aten._softmax), (sm.log_softmax, aten._log_softmax)):
        assert_matches(fn(x, 1, False), ref, x, 1, False)
        assert_matches(fn(x.t(), 0, False), ref, x.t(), 0, False)


def test_zero_dim_and_empty() -> None:
    s = torch.tensor(1.5, device=DEVICE)
    for dim in (0, -1):
        assert_matches(sm.softmax(s, dim, False), aten._softmax, s, dim, False)
        assert_matches(sm.log_softmax(s, dim, False), aten._log_softmax, s, dim, False)
        assert_matches(sm.softmax_backward_data(s, s, dim, s.dtype),
                       aten._softmax_backward_data, s, s, dim, s.dtype)  # fmt: skip
    for shape, dim in (((0, 4), 0), ((0, 4), 1), ((3, 0), 1), ((2, 0, 3), 2)):
        e = torch.empty(shape, device=DEVICE)
        assert_matches(sm.softmax(e, dim, False), aten._softmax, e, dim, False)
        assert_matches(sm.log_softmax(e, dim, False), aten._log_softmax, e, dim, False)
        assert_matches(sm.log_softmax_backward_data(e, e, dim, e.dtype),
                       aten._log_softmax_backward_data, e, e, dim, e.dtype)  # fmt: skip
    with pytest.raises(IndexError, match="Dimension out of range"):
        sm.softmax(torch.randn(3, 4, device=DEVICE), 2, False)


def test_half_to_float() -> None:
    """f16 in, f32 out (the CUDA kernels' path; eager's CPU kernels reject it, so the
    reference is eager on the f32 upcast)."""
    h = (torch.randn(7, 40) * 3).half().to(DEVICE)
    got = sm.softmax(h, 1, True)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, aten._softmax(h.float(), 1, False), atol=1e-6, rtol=1e-5)
    got = sm.log_softmax(h.t(), 0, True)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, aten._log_softmax(h.t().float(), 0, False), atol=1e-5,
                               rtol=1e-5)  # fmt: skip
    # backward of a half_to_float softmax: f32 grad and output, f16 grad_input
    y = got.exp()
    grad = torch.randn(y.shape).to(DEVICE)
    gi = sm.softmax_backward_data(grad, y, 0, torch.float16)
    assert gi.dtype == torch.float16
    want = aten._softmax_backward_data(grad, y, 0, torch.float32).half()
    torch.testing.assert_close(gi, want, atol=1e-3, rtol=1e-3)
    with pytest.raises(RuntimeError, match="Half type only"):
        sm.softmax(h.float(), 1, True)


def _same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, equal_nan=True, atol=1e-6, rtol=1e-5)


def test_out_variants() -> None:
    x = torch.randn(5, 9).to(DEVICE)
    out = torch.empty(0, device=DEVICE)
    assert sm.softmax_out(x, 1, False, out=out) is out
    _same(out, x.softmax(1))
    out = torch.empty(9, 5, device=DEVICE).t()  # a strided out keeps its strides
    assert sm.log_softmax_out(x, 0, False, out=out) is out
    assert out.stride() == (1, 5)
    _same(out, x.log_softmax(0))
    y = x.softmax(1)
    grad = torch.randn(5, 9).to(DEVICE)
    gi = torch.empty(5, 9, device=DEVICE)
    assert sm.softmax_backward_data_out(grad, y, 1, x.dtype, grad_input=gi) is gi
    _same(gi, aten._softmax_backward_data(grad, y, 1, x.dtype))
    ly = x.log_softmax(1)
    out = torch.empty(0, device=DEVICE)
    assert sm.log_softmax_backward_data_out(grad, ly, 1, x.dtype, out=out) is out
    _same(out, aten._log_softmax_backward_data(grad, ly, 1, x.dtype))


@_CUDA_HALF_BACKWARD
def test_repeat_calls_reuse_the_plan_and_allocate_fresh_outputs() -> None:
    """The second call with the same layouts and arguments takes the cached launch: same
    values and strides, a new tensor; arguments that failed the checks fail them again."""
    x = torch.randn(6, 4, 10).half().to(DEVICE).permute(0, 2, 1)
    y = aten._softmax(x, 1, False)
    grad = torch.randn(y.shape).half().to(DEVICE)
    for fn, ref, args in (
        (sm.softmax, aten._softmax, (x, 1, False)),
        (sm.log_softmax, aten._log_softmax, (x, -1, False)),
        (sm.softmax_backward_data, aten._softmax_backward_data, (grad, y, 1, x.dtype)),
        (sm.log_softmax_backward_data, aten._log_softmax_backward_data, (grad, y, 0, x.dtype)),
    ):
        first, second = fn(*args), fn(*args)
        assert second is not first and torch.equal(first, second)
        assert second.stride() == first.stride()
        assert_matches(second, ref, *args)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="conversion is supported for Half type only"):
            sm.softmax(x.float(), 1, True)


def _cuda_eager_softmax_backward(grad: torch.Tensor, out: torch.Tensor, dim: int) -> torch.Tensor:
    """CUDA eager's softmax backward, written out: ``tmp = grad * output`` as a tensor op
    (rounded to the dtype), then ``tmp - output * sum(tmp)`` in float32, rounded once."""
    tmp = (grad * out).float()
    return (tmp - out.float() * tmp.sum(dim, keepdim=True)).to(grad.dtype)


@pytest.mark.parametrize(
    "dtype",
    # bfloat16 on the CPU too since the harness rounds the interpreter's float32 ->
    # bfloat16 casts to nearest even (opbench.instrument.interpreter_rounding)
    [torch.float16, torch.bfloat16],
    ids=str,
)
@pytest.mark.parametrize("shape, dim", [((6, 40), 1), ((5, 7, 3), 1), ((3, 5000), 1)])
def test_backward_rounds_the_product_as_cuda_eager(monkeypatch, shape, dim, dtype) -> None:
    """The CUDA plan (``_rounds_product``), forced on whatever device the tests run on,
    against CUDA eager's formula written out: short rows, a non-innermost dim and a long
    row (the one-row-a-program kernel); a gradient close to ``sum(grad * output)`` so the
    subtraction cancels and the rounding of the product shows."""
    monkeypatch.setattr(sm, "_rounds_product", lambda grad, log: not log)
    monkeypatch.setattr(sm, "_LAUNCHES", {})
    g = torch.Generator().manual_seed(3)
    x = torch.randn(shape, generator=g).to(DEVICE, dtype)
    out = aten._softmax(x, dim, False)
    grad = (1 + 0.01 * torch.randn(shape, generator=g)).to(DEVICE, dtype)
    got = sm.softmax_backward_data(grad, out, dim, dtype)
    want = _cuda_eager_softmax_backward(grad, out, dim)
    torch.testing.assert_close(got.float(), want.float(), atol=1e-6, rtol=4e-3)
    # and the CPU formula differs here, or the test could not tell the two apart
    plain = out.float() * (grad.float() - (grad.float() * out.float()).sum(dim, keepdim=True))
    assert not torch.equal(plain.to(dtype), want)
