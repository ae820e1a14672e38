"""The OpInfo suite, on a few OpInfos (mapping all of op_db takes a minute; not here)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("expecttest")

from opbench.judge.evaluate import JudgeOptions, judge_in_process  # noqa: E402
from opbench.spec.ops import get_overload  # noqa: E402
from opbench.suites import opinfo  # noqa: E402
from opbench.suites.materialize import materialize  # noqa: E402

NAMES = ["sin", "add", "nn.functional.relu", "sum", "max", "mm", "where"]


@pytest.fixture(scope="module")
def quick_cases():
    return opinfo.build_opinfo_cases("cpu", "quick", opinfo_names=NAMES)


@pytest.mark.slow
def test_cases_cover_variants_and_dtypes(quick_cases):
    ops = {c.op for c in quick_cases}
    for name in ("sin.default", "sin_.default", "sin.out", "add.Tensor", "add_.Tensor"):
        assert name in ops, sorted(ops)
    assert "mm.default" in ops and "relu.default" in ops
    assert {c.params["dtype"] for c in quick_cases} == {"float32", "bfloat16"}
    assert {c.params["variant"] for c in quick_cases} == {"functional", "inplace", "out"}
    for c in quick_cases:
        assert c.source == "opinfo" and c.suite == "opinfo"
        assert c.args.startswith("((")
    # the quick profile keeps a few samples per (overload, dtype, variant), plus for
    # elementwise ops at most a strided and a special-value case derived from one of them
    groups: dict = {}
    derived: dict = {}
    for c in quick_cases:
        key = (c.op, c.params["dtype"], c.params["variant"])
        extra = {"layout", "values"} & set(c.params)
        counts = derived if extra else groups
        counts[key] = counts.get(key, 0) + 1
    assert max(groups.values()) <= opinfo.QUICK_MAX_PER_GROUP
    assert derived and max(derived.values()) <= 2 and set(derived) <= set(groups)
    from opbench.run.session import coverage_of

    stats = coverage_of(quick_cases)
    assert stats["tests"] == len(quick_cases) and stats["overloads"] == len(ops)
    assert sum(stats["by_variant"].values()) == len(quick_cases)
    assert set(stats["by_variant"]) <= {"functional", "inplace", "out"}


def test_ops_and_dtypes_narrow(quick_cases):
    only = opinfo.build_opinfo_cases(
        "cpu", "quick", dtypes=[torch.float32], ops={"sin"}, opinfo_names=["sin"]
    )
    assert only and {c.op.split(".")[0] for c in only} <= {"sin", "sin_"}
    assert {c.params["dtype"] for c in only} == {"float32"}


def test_materialize_reaches_the_overload_and_is_reproducible(quick_cases):
    case = next(
        c
        for c in quick_cases
        if c.op == "add.Tensor" and c.params["dtype"] == "float32" and "T([]" not in c.args
    )
    args1, kwargs1 = materialize(case, "cpu", 0)
    args2, kwargs2 = materialize(case, "cpu", 0)
    args3, _ = materialize(case, "cpu", 12345)
    t1 = [a for a in args1 if isinstance(a, torch.Tensor)]
    t2 = [a for a in args2 if isinstance(a, torch.Tensor)]
    t3 = [a for a in args3 if isinstance(a, torch.Tensor)]
    assert all(torch.equal(a, b) and a is not b for a, b in zip(t1, t2))
    assert [a.shape for a in t1] == [a.shape for a in t3]
    assert any(not torch.equal(a, b) for a, b in zip(t1, t3) if a.numel() > 1)
    get_overload(case.op)(*args1, **kwargs1)  # the ATen-level arguments call the overload


def test_inputs_are_fresh_copies(quick_cases):
    case = next(c for c in quick_cases if c.op == "sin_.default" and c.params["dtype"] == "float32")
    args, kwargs = materialize(case, "cpu", 0)
    before = args[0].clone()
    get_overload(case.op)(*args, **kwargs)  # writes into its own copy
    again, _ = materialize(case, "cpu", 0)
    assert torch.equal(again[0], before)


def test_out_cases_pass_out_as_a_keyword(quick_cases):
    case = next(c for c in quick_cases if c.op == "sin.out")
    _, kwargs = materialize(case, "cpu", 0)
    assert isinstance(kwargs.get("out"), torch.Tensor)


def test_aten_passes_every_case(quick_cases):
    options = JudgeOptions()
    bad = []
    for case in quick_cases:
        v = judge_in_process(case, get_overload(case.op), "cpu", options)
        if v.status != "passed":
            bad.append((case.op, case.params, v.status, v.category, v.message))
    assert not bad, bad[:5]


def test_unknown_profile():
    with pytest.raises(ValueError):
        opinfo.profile_dtypes("cpu", "huge")
    assert opinfo.profile_dtypes("cuda", "quick") == [torch.float32, torch.float16]
    assert opinfo.profile_dtypes("cpu", "full") is None


def test_compute_op_ignores_view_and_allocation_noise():
    assert opinfo._compute_op(["t.default", "addmm.default"]) == "addmm.default"
    assert opinfo._compute_op(["detach.default", "sin.default"]) == "sin.default"
    assert opinfo._compute_op(["mul.Tensor", "add.Tensor"]) is None
    assert opinfo._compute_op(["add.Tensor", "add.Tensor"]) is None
    assert opinfo._compute_op(["permute.default"]) == "permute.default"


def test_special_values_turn_weak_opinfo_samples_into_real_tests():
    # isnan's OpInfo samples hold no NaN: "all False" would pass them. The special-value
    # re-draw injects NaN/Inf/0, so the lazy kernel fails and PyTorch's own passes non-weak.
    cases = [
        c
        for c in opinfo.build_opinfo_cases("cpu", "quick", opinfo_names=["isnan"])
        if c.op == "isnan.default" and c.params["dtype"] == "float32"
    ]
    assert cases
    opts = JudgeOptions()

    def lazy(x):
        return torch.zeros(x.shape, dtype=torch.bool)

    verdicts = [judge_in_process(c, lazy, "cpu", opts) for c in cases]
    assert all(v.status == "failed" for v in verdicts), [
        (v.status, v.category, v.weak) for v in verdicts
    ]
    aten = get_overload("isnan.default")
    honest = [judge_in_process(c, aten, "cpu", opts) for c in cases]
    assert all(v.status == "passed" for v in honest)
    assert any(not v.weak and "redrawn_seed" in v.details for v in honest)


def test_special_injection_is_reproducible_and_spares_expanded_tensors():
    from opbench.suites.materialize import inject_specials

    a, b = torch.randn(64, 64), torch.randn(64, 64)
    b.copy_(a)
    expanded = torch.randn(64).expand(8, 64)
    before = expanded.clone()
    inject_specials([a, {"x": expanded}], 7)
    inject_specials([b], 7)
    assert torch.equal(torch.isnan(a), torch.isnan(b)) and bool(torch.isnan(a).any())
    assert bool(torch.isinf(a).any()) and torch.equal(expanded, before)


def test_loop_bound_arguments_get_no_special_values():
    # the polynomials' kernels loop n times; CUDA casts an injected +Inf or 1e30 n to
    # 2**63 - 1 (a kernel that never ends), so only x gets the special values
    names = ["special.chebyshev_polynomial_t", "special.hermite_polynomial_h"]
    cases = [
        c
        for c in opinfo.build_opinfo_cases("cpu", "quick", opinfo_names=names)
        if c.params["dtype"] == "float32" and c.op.endswith(".default")
    ]
    derived = [c for c in cases if c.params.get("values") == "special"]
    assert {c.op for c in derived} == {
        "special_chebyshev_polynomial_t.default",
        "special_hermite_polynomial_h.default",
    }
    from opbench.suites.special_values import special_seeds

    for c in derived + [dataclasses.replace(c, seed=special_seeds(c)[0]) for c in cases]:
        (x, n), _ = opinfo.opinfo_inputs(c, "cpu")
        assert bool(torch.isfinite(n).all()) and bool((n.abs() < 100).all()), c.op
    (x, n), _ = opinfo.opinfo_inputs(derived[0], "cpu")
    assert not bool(torch.isfinite(x).all())


def test_ops_hint_maps_only_the_opinfos_named_like_the_asked_ops():
    assert "sin" in opinfo._opinfos_named_for({"sin.default", "add_.Tensor"})
    assert "add" in opinfo._opinfos_named_for({"sin.default", "add_.Tensor"})
    assert "nn.functional.relu" in opinfo._opinfos_named_for({"relu"})
    # an op no OpInfo is named after needs the whole mapping
    assert opinfo._opinfos_named_for({"sin", "no_such_op_anywhere"}) is None
    cases = opinfo.build_opinfo_cases("cpu", "quick", hint_ops={"sin"})
    assert {c.op for c in cases} >= {"sin.default", "sin_.default", "sin.out"}
    assert all(c.params["opinfo"] == "sin" for c in cases if c.op.startswith("sin"))


def test_no_inplace_variant_for_self_overlapping_inputs():
    """Writing a tensor whose elements share memory is undefined (``polygamma_`` on a
    float64 reference input with strides (1, 1, 7) never returned), so such samples
    keep their functional and out= variants only."""
    from torch.testing._internal.opinfo.core import SampleInput

    base = torch.rand(64)
    overlapping = base.as_strided((5, 6, 2), (1, 1, 7))
    assert opinfo._self_overlapping(overlapping)
    assert opinfo._self_overlapping(torch.rand(4).expand(3, 4))
    assert not opinfo._self_overlapping(torch.rand(4, 3).t())
    # PyTorch answers "too hard" for non-dense tensors; a slice's elements are distinct
    assert torch._debug_has_internal_overlap(torch.rand(20, 40)[:, ::2].t()) == 2
    assert not opinfo._self_overlapping(torch.rand(20, 40)[:, ::2].t())
    assert opinfo._self_overlapping(torch.rand(500).as_strided((5, 5, 2), (5, 5, 7), 3))
    info = opinfo.opinfos_by_key()[("abs", "")]
    variants = {e["variant"] for e in opinfo._map_one(info, SampleInput(overlapping), "cpu")}
    assert "functional" in variants and "inplace" not in variants
    plain = {e["variant"] for e in opinfo._map_one(info, SampleInput(torch.rand(5, 6)), "cpu")}
    assert "inplace" in plain
    sliced = SampleInput(torch.rand(5, 12)[:, ::2])
    assert "inplace" in {e["variant"] for e in opinfo._map_one(info, sliced, "cpu")}


def test_mapping_build_reports_which_opinfo_it_is_on():
    lines: list[str] = []
    opinfo.build_opinfo_cases(
        "cpu", "quick", dtypes=[torch.float32], opinfo_names=["sin", "cos"], progress=lines.append
    )
    assert any("float32: 1/2" in line for line in lines)
    assert any("float32: 2/2" in line for line in lines)
    mapping = [line for line in lines if line.startswith("mapping OpInfo")]
    assert {line.rsplit(" ", 1)[-1] for line in mapping} == {"sin", "cos"}


def test_ops_no_opinfo_is_named_after_are_found_through_the_alias_table():
    """``_softmax`` (reached from ``softmax``) and ``convolution`` (from
    ``nn.functional.conv2d``) no longer force the full mapping of every OpInfo; backward
    ops, which forward samples never reach, need none; an op nothing reaches still does."""
    from opbench.suites.opinfo import _opinfos_named_for

    names = _opinfos_named_for({"_softmax.default", "convolution.default", "threshold_backward"})
    assert names is not None
    assert {"softmax", "nn.functional.conv2d"} <= names
    assert _opinfos_named_for({"relu", "no_such_op_anywhere"}) is None
