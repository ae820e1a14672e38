"""The correctness rule against float64 references computed here (never against itself)."""

from __future__ import annotations

import math

import pytest
import torch

from opbench.judge import correctness as corr


def ref_and_eager(fn, *inputs):
    """Eager output on the inputs and the float64 reference on upcast inputs."""
    eager = fn(*inputs)
    ref = fn(*[x.double() if x.is_floating_point() else x for x in inputs])
    return eager, ref


def test_tolerance_table_is_assert_close_defaults():
    assert corr.tolerance_for(torch.float32) == corr.Tolerance(1e-5, 1.3e-6)
    assert corr.tolerance_for(torch.float16) == corr.Tolerance(1e-5, 1e-3)
    assert corr.tolerance_for(torch.bfloat16) == corr.Tolerance(1e-5, 1.6e-2)
    assert corr.tolerance_for(torch.float64) == corr.Tolerance(1e-7, 1e-7)
    assert corr.tolerance_for(torch.int32) == corr.Tolerance(0.0, 0.0)
    # one ulp is always inside the relative floor
    for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        assert torch.finfo(dt).eps <= corr.tolerance_for(dt).rtol * 1.0001 or dt == torch.float16


def test_eager_passes_against_itself():
    torch.manual_seed(0)
    x = torch.randn(100, dtype=torch.float16)
    e, r = ref_and_eager(torch.sin, x)
    assert corr.compare_tensor(e, e, r).ok


def test_one_ulp_off_where_eager_is_exact_passes():
    x = torch.tensor([1.0, 2.0, 3.0])
    e = x.clone()
    c = torch.nextafter(x, torch.full_like(x, 10.0))
    assert corr.compare_tensor(c, e, x.double()).ok


def test_error_message_names_position_and_tolerance():
    torch.manual_seed(0)
    x = torch.randn(8, 32)
    e, r = ref_and_eager(torch.exp, x)
    c = e.clone()
    c[4, 17] += 0.05
    res = corr.compare_tensor(c, e, r, op="exp.default")
    assert res.category == "wrong_result"
    assert "at [4, 17]" in res.message
    assert "allowed" in res.message and "eager err" in res.message
    assert res.max_abs_err == pytest.approx(0.05, rel=1e-3)


def test_rtol_scale_tightens_and_loosens():
    x = torch.linspace(100, 200, 50, dtype=torch.float64)
    e = x.float()
    c = (x * (1 + 5e-6)).float()  # 5e-6 relative: above f32's 1.3e-6 floor
    assert not corr.compare_tensor(c, e, x).ok
    assert corr.compare_tensor(c, e, x, rtol_scale=10).ok
    c2 = (x * (1 + 1e-6)).float()
    assert corr.compare_tensor(c2, e, x).ok
    assert not corr.compare_tensor(c2, e, x, rtol_scale=0.1).ok


def test_integers_and_bools_are_exact():
    e = torch.tensor([1, 2, 3])
    assert corr.compare_tensor(e.clone(), e, None).ok
    res = corr.compare_tensor(torch.tensor([1, 2, 4]), e, None)
    assert res.category == "wrong_result" and "exact" in res.message
    b = torch.tensor([True, False])
    assert corr.compare_tensor(torch.tensor([True, True]), b, None).category == "wrong_result"


def test_nan_and_inf_positions_must_agree():
    e = torch.tensor([1.0, float("nan"), float("inf")])
    r = e.double()
    assert corr.compare_tensor(e.clone(), e, r).ok
    assert (
        corr.compare_tensor(torch.tensor([1.0, 0.0, float("inf")]), e, r).category == "nan_mismatch"
    )
    assert (
        corr.compare_tensor(torch.tensor([1.0, float("nan"), -float("inf")]), e, r).category
        == "nan_mismatch"
    )
    assert (
        corr.compare_tensor(torch.tensor([1.0, float("nan"), 3.0e38]), e, r).category
        == "nan_mismatch"
    )


def test_overflow_at_the_edge_of_the_range_is_tolerated():
    # eager f16 rounds the true value 65530 up to inf; a candidate giving 65504 is fine
    r = torch.tensor([65530.0], dtype=torch.float64)
    e = r.half()
    assert math.isinf(e.item())
    assert corr.compare_tensor(torch.tensor([65504.0], dtype=torch.float16), e, r).ok


def test_meta_mismatches():
    e = torch.zeros(2, 3)
    assert corr.compare_tensor(torch.zeros(3, 2), e, None).category == "wrong_meta"
    assert (
        corr.compare_tensor(torch.zeros(2, 3, dtype=torch.float64), e, None).category
        == "wrong_meta"
    )
    res = corr.compare_tensor(torch.zeros(2, 3), e, None, cand_device="meta", eager_device="cpu")
    assert res.category == "wrong_meta" and "device" in res.message


def test_structures_and_scalars():
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    e = torch.max(x, 1)
    r = torch.max(x.double(), 1)
    assert corr.compare_outputs(tuple(e), tuple(e), tuple(r)).ok
    assert corr.compare_outputs((e[0],), tuple(e), tuple(r)).category == "wrong_meta"
    bad = (e[0], e[1].flip(0))
    res = corr.compare_outputs(bad, tuple(e), tuple(r))
    assert res.category == "wrong_result" and "output[1]" in res.message
    assert corr.compare_outputs(3, 3, 3).ok
    assert not corr.compare_outputs(4, 3, 3).ok
    assert corr.compare_outputs(1.0 + 1e-12, 1.0, 1.0).ok
    assert corr.compare_outputs(None, None, None).ok


def test_complex_compared_by_parts():
    torch.manual_seed(0)
    z = torch.randn(16, dtype=torch.complex64)
    e, r = ref_and_eager(torch.exp, z.real.clone())
    ze = torch.exp(z)
    zr = torch.exp(z.to(torch.complex128))
    assert corr.compare_tensor(ze.clone(), ze, zr).ok
    bad = ze.clone()
    bad[3] += 1e-3j
    assert corr.compare_tensor(bad, ze, zr).category == "wrong_result"
    assert e is not None and r is not None


def test_norm_fallback_accepts_another_summation_order():
    torch.manual_seed(0)
    x = torch.randn(64, 4096) * 100
    eager = x.sum(1)
    ref = x.double().sum(1)
    # sequential float32 accumulation: a different (worse) order than eager's
    cand = torch.zeros(64)
    for j in range(0, 4096, 1):
        cand += x[:, j]
    assert corr.compare_tensor(cand, eager, ref, op="sum.dim_IntList").ok


def test_norm_fallback_rejects_half_precision_accumulation():
    torch.manual_seed(0)
    a = torch.randn(64, 1024)
    b = torch.randn(1024, 32)
    eager, ref = a @ b, a.double() @ b.double()
    cand = (a.half() @ b.half()).float()
    res = corr.compare_tensor(cand, eager, ref, op="mm.default")
    assert res.category == "wrong_result"
    assert "norm test also failed" in res.message


def test_uses_norm_fallback():
    assert corr.uses_norm_fallback("mm.default")
    assert corr.uses_norm_fallback("sum.dim_IntList")
    assert corr.uses_norm_fallback("addmm_.default")
    assert corr.uses_norm_fallback("_softmax.default")
    assert not corr.uses_norm_fallback("sin.default")
    assert corr.uses_norm_fallback("weird.default", out_numel=4, max_in_numel=16)


def test_eager_fallback_when_no_reference():
    e = torch.tensor([1.0, 2.0])
    res = corr.compare_tensor(e + 1e-7, e, None)
    assert res.ok and res.details.get("reference") == "eager"


def test_bitwise_equal():
    a = torch.tensor([float("nan"), 1.0])
    assert corr.bitwise_equal(a, a.clone())
    assert not corr.bitwise_equal(torch.tensor([0.0]), torch.tensor([-0.0]))
    assert corr.bitwise_equal((a, 1), (a.clone(), 1))


def test_trivial_answers():
    # zero-size: everything passes
    e = torch.zeros(0, 4)
    assert set(corr.trivial_answers(e, e.double(), e)) == {"zeros", "input_copy"}
    # relu of a positive 0-dim input is the input
    x = torch.tensor(2.5)
    assert "input_copy" in corr.trivial_answers(torch.relu(x), torch.relu(x.double()), x)
    # a real test: nothing trivial passes
    torch.manual_seed(0)
    y = torch.randn(32, 32)
    assert corr.trivial_answers(torch.sin(y), torch.sin(y.double()), y) == []
    # a comparison that is all False: zeros pass
    b = torch.zeros(8, dtype=torch.bool)
    assert "zeros" in corr.trivial_answers(b, b, y[:8, 0])


def test_eager_nan_that_the_reference_lacks_is_not_held_against_the_candidate():
    # float16 grid_sampler_2d on CPU: eager gave NaN where float64 (and another process's
    # eager) gave finite values. A candidate that matches the reference must pass...
    ref = torch.tensor([0.5, -1.25, 2.0, 3.0], dtype=torch.float64)
    eager = torch.tensor([0.5, float("nan"), 2.0, 3.0], dtype=torch.float16)
    good = ref.to(torch.float16)
    c = corr.compare_tensor(good, eager, ref)
    assert c.ok, c.message
    assert c.details["eager_nonfinite_not_in_reference"] == 1
    # ... but its value there is still checked against the reference,
    bad_value = good.clone()
    bad_value[1] = 7.0
    assert corr.compare_tensor(bad_value, eager, ref).category == "wrong_result"
    # a NaN the reference also has must still be reproduced,
    ref_nan = ref.clone()
    ref_nan[1] = float("nan")
    assert corr.compare_tensor(good, eager, ref_nan).category == "nan_mismatch"
    # a candidate NaN that neither eager nor the reference has is wrong,
    cand_nan = good.clone()
    cand_nan[2] = float("nan")
    assert corr.compare_tensor(cand_nan, eager, ref).category == "nan_mismatch"
    # and copying eager's own NaN is accepted (it is what PyTorch does).
    assert corr.compare_tensor(eager.clone(), eager, ref).ok


def test_unreproducible_eager_nan_marks_the_comparison_unreliable_not_failed():
    # Eager's NaN where float64 is finite moves between processes (float16 grid_sampler
    # on CPU): a candidate with no more such trouble than eager is flagged, not failed.
    ref = torch.arange(1.0, 401.0, dtype=torch.float64)
    eager = ref.to(torch.float16)
    eager[:20] = float("nan")
    cand = ref.to(torch.float16)
    cand[40:50] = float("nan")
    cand[50] = float("inf")
    c = corr.compare_tensor(cand, eager, ref)
    assert c.ok and "eager_unreliable" in c.details, c.message
    # far more trouble than eager's own is a failure,
    many = ref.to(torch.float16)
    many[30:] = float("nan")  # 370 > 10 x 20
    assert corr.compare_tensor(many, eager, ref).category == "nan_mismatch"
    # and with a trustworthy eager (no NaN of its own), any extra NaN fails.
    assert corr.compare_tensor(cand, ref.to(torch.float16), ref).category == "nan_mismatch"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_comparing_on_the_gpu_gives_the_cpu_verdict():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(1000, 300, dtype=torch.float64, generator=g)
    eager = ref.float()
    wrong = eager.clone()
    wrong[7, 11] += 1.0
    nan = eager.clone()
    nan[3, 3] = float("nan")
    for cand in (eager + 1e-7, wrong, nan):
        on_cpu = corr.compare_outputs(cand, eager, ref)
        on_gpu = corr.compare_outputs(cand, eager, ref, work_device="cuda")
        assert (on_gpu.category, on_gpu.message) == (on_cpu.category, on_cpu.message)
        assert on_gpu.max_abs_err == on_cpu.max_abs_err


def test_work_device_cpu_is_the_default():
    ref = torch.linspace(-3, 3, 101, dtype=torch.float64)
    eager = ref.float()
    bad = eager.clone()
    bad[50] = 9.0
    assert corr.compare_outputs(bad, eager, ref, work_device="cpu").message == (
        corr.compare_outputs(bad, eager, ref).message
    )
    assert not corr.compare_outputs(bad, eager, ref, work_device="cpu").ok


def test_trivial_answers_of_large_outputs_agree_with_the_full_comparison():
    """Outputs over SAMPLE_ABOVE elements are first tried on a sample that is built at the
    sampled positions only; a trivial answer that passes must still be found, and one that
    fails must not be."""
    n = corr.SAMPLE_ABOVE + 5
    x = torch.randn(n, generator=torch.Generator().manual_seed(0))
    relu = torch.relu(x.abs())  # equal to its input: a copy passes, zeros do not
    assert corr.trivial_answers(relu, relu.double(), x.abs()) == ["input_copy"]
    const = torch.full((n,), 2.5)  # a constant output: the constant answer passes
    assert "constant" in corr.trivial_answers(const, const.double(), x)
    assert corr.trivial_answers(torch.sin(x), torch.sin(x.double()), x) == []


def test_constant_answer_is_the_mean_of_finite_values():
    x = torch.randn(1000, generator=torch.Generator().manual_seed(1))
    x[::7] = float("nan")
    x[3::11] = float("inf")
    finite = x[torch.isfinite(x)].double()
    assert corr._finite_mean(x) == pytest.approx(float(finite.mean()), rel=1e-12)
    assert corr._finite_mean(torch.full((4,), float("nan"))) == 0.0
