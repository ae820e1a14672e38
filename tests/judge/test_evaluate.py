"""The worker/harness pipeline: aten against itself, plain-data reports, trials, variants."""

from __future__ import annotations

import io
import json
from dataclasses import asdict

import numpy as np
import pytest
import torch

from opbench.instrument.candidate import run_candidate
from opbench.judge.evaluate import (
    CandidateReport,
    JudgeOptions,
    derive_seed,
    judge_in_process,
    judge_report,
    plan_trials,
    trial_seeds,
)
from opbench.spec.ops import get_overload
from opbench.spec.variants import derive_inplace, derive_out
from opbench.suites.case import Case
from opbench.suites.smoke import build_smoke_cases

OPTS = JudgeOptions()


def judge(case: Case, kernel, options: JudgeOptions = OPTS):
    return judge_in_process(case, kernel, "cpu", options)


@pytest.mark.parametrize("case", build_smoke_cases(), ids=lambda c: c.op)
def test_aten_passes_the_smoke_suite(case):
    v = judge(case, get_overload(case.op))
    assert v.status == "passed", v
    assert not v.weak
    assert v.details["guard"].startswith("skipped")
    json.dumps(asdict(v))  # details are JSON-serialisable


def test_report_survives_the_worker_protocol():
    from opbench.run import protocol

    case = Case(op="add_.Tensor", args="((T([8, 8], f32), T([8], f32)), {})")
    plan, _ = plan_trials(case, "cpu", OPTS)
    report = run_candidate(case, get_overload(case.op), "cpu", OPTS, plan)
    buf = io.BytesIO()
    protocol.write_plain(buf, report)
    plain = protocol.decode_plain(buf.getvalue()[protocol.HEADER_SIZE :])
    again = CandidateReport.from_plain(plain)
    assert [t.seed for t in again.trials] == [t.seed for t in report.trials]
    v = judge_report(case, again, "cpu", OPTS, guard=False)  # PyTorch itself
    assert v.status == "passed", v


def test_malformed_reports_are_rejected():
    with pytest.raises(TypeError):
        CandidateReport.from_plain(["not", "a", "dict"])
    v = judge_report(
        Case(op="add.Tensor", args="((T([2], f32), T([2], f32)), {})"),
        CandidateReport(op="add.Tensor", test_id="x"),
        "cpu",
        OPTS,
    )
    assert (v.status, v.category) == ("failed", "error")


def test_trial_seeds_are_stable_and_distinct():
    assert trial_seeds(0, 3)[0] == 0
    assert len(set(trial_seeds(0, 3))) == 3
    assert trial_seeds(7, 2) == trial_seeds(7, 2)
    assert derive_seed(7, 1) != derive_seed(8, 1)
    case = Case(op="relu.default", args="((T([64], f32),), {})", seed=5)
    report = run_candidate(case, get_overload(case.op), "cpu", JudgeOptions(trials=3))
    assert [t.seed for t in report.trials] == trial_seeds(5, 3)
    # the inputs of the trials differ (fresh values, same shapes)
    o = [t.outputs for t in report.trials]
    assert o[0].shape == o[1].shape and not torch.equal(o[0], o[1])


def np_add(a, b, alpha=1):
    return torch.from_numpy(np.ascontiguousarray(a.numpy() + b.numpy() * alpha))


def test_variants_derived_from_a_functional_kernel_pass():
    inplace = Case(op="add_.Tensor", args="((T([16, 32], f32), T([32], f32)), {})")
    assert judge(inplace, derive_inplace(np_add, "add_.Tensor")).status == "passed"
    out = Case(op="add.out", args="((T([16, 32], f32), T([32], f32)), {'out': T([16, 32], f32)})")
    assert judge(out, derive_out(np_add, "add.out")).status == "passed"
    # an out tensor of the wrong size is resized, as PyTorch does
    out0 = Case(op="add.out", args="((T([16, 32], f32), T([32], f32)), {'out': T([0], f32)})")
    assert judge(out0, derive_out(np_add, "add.out")).status == "passed"


def test_out_must_keep_the_strides_of_a_right_sized_out():
    case = Case(
        op="add.out",
        args="((T([16, 32], f32), T([16, 32], f32)), {'out': T([16, 32], f32, stride=(1, 16))})",
    )
    assert judge(case, get_overload(case.op)).status == "passed"

    def restride(a, b, alpha=1, *, out):
        r = np_add(a, b, alpha)
        out.set_(r.untyped_storage(), 0, r.shape, r.stride())  # contiguous now
        return out

    v = judge(case, restride, JudgeOptions(allow_pytorch=True))
    assert (v.status, v.category) == ("failed", "wrong_meta")


def test_eager_rejecting_the_inputs_means_skipped():
    case = Case(op="add_.Tensor", args="((T([4], f32), T([3, 4], f32)), {})")
    v = judge(case, lambda a, b, alpha=1: a)
    assert v.status == "skipped"
    assert "eager PyTorch rejects" in v.message


@pytest.mark.slow
def test_unrunnable_opinfo_case_is_skipped():
    case = Case(
        op="sin.default",
        args="?",
        source="opinfo",
        params={"opinfo": "no-such-op", "variant_test_name": "", "dtype": "float32", "index": 0},
    )
    v = judge(case, get_overload("sin.default"))
    assert v.status == "skipped"


def test_written_arguments_must_match_eager():
    """native_batch_norm updates running statistics (not marked in its schema)."""
    op = "native_batch_norm.default"
    args = (
        "((T([8, 4, 5], f32), T([4], f32), T([4], f32), T([4], f32), T([4], f32), True, 0.1, "
        "1e-05), {})"
    )
    case = Case(op=op, args=args)
    assert judge(case, get_overload(op)).status == "passed"
    ref = get_overload(op)

    def forgets_running_stats(x, w, b, rm, rv, training, momentum, eps):
        return ref(x, w, b, rm.clone(), rv.clone(), training, momentum, eps)

    v = judge(case, forgets_running_stats, JudgeOptions(allow_pytorch=True))
    assert (v.status, v.category) == ("failed", "wrong_result")
    assert "written argument" in v.message


def test_determinism_can_be_switched_off():
    rng = np.random.default_rng(0)

    def noisy(x):
        return torch.from_numpy(
            np.maximum(x.numpy(), 0) + rng.normal(size=x.shape).astype(np.float32) * 1e-9
        )

    case = Case(op="relu.default", args="((T([64], f32),), {})")
    assert judge(case, noisy).category == "nondeterministic"
    assert judge(case, noisy, JudgeOptions(check_determinism=False)).status == "passed"


@pytest.mark.parametrize("reduction", [0, 1])
def test_total_weight_is_undefined_only_without_reduction(reduction):
    """nll_loss's total_weight is never read with reduction='none' (CUDA leaves it
    uninitialised), so any value passes there; with 'mean' it must be the weight sum."""
    op = "nll_loss_forward.default"
    case = Case(op=op, args=f"((T([16, 5], f32), T([16], i64), None, {reduction}, -100), {{}})")
    ref = get_overload(op)
    rng = np.random.default_rng(0)

    def garbage_total_weight(x, target, weight, red, ignore_index):
        loss, _ = ref(x, target, weight, red, ignore_index)
        return loss, torch.tensor(float(rng.normal()) * 100, dtype=x.dtype)

    assert judge(case, ref).status == "passed"
    v = judge(case, garbage_total_weight, JudgeOptions(allow_pytorch=True))
    if reduction == 0:
        assert v.status == "passed", v
    else:
        assert (v.status, v.category) == ("failed", "wrong_result"), v
        assert "output[1]" in v.message


def test_output_devices_are_compared_per_output():
    """A factory op without a device argument returns a CPU tensor even in a CUDA run:
    the expected device is the one eager's output had, not the run's."""
    from opbench.judge import correctness as corr

    t = torch.arange(4.0)
    same = corr.compare_outputs(
        t, t.clone(), None, cand_devices={"": "cpu"}, eager_devices={"": "cpu"}
    )
    assert same.ok
    moved = corr.compare_outputs(
        t, t.clone(), None, cand_devices={"": "cuda:0"}, eager_devices={"": "cpu"}
    )
    assert moved.category == "wrong_meta" and "device" in moved.message


def test_random_ops_judge_the_outputs_that_do_not_depend_on_the_generator():
    from opbench.judge.evaluate import generator_dependent_outputs

    out, states, reserve = torch.ones(3), torch.zeros(2), torch.arange(4.0)
    same = (out, states, reserve)
    reseeded = (out.clone(), states.clone(), reserve + 1)
    assert generator_dependent_outputs(same, same) == frozenset()
    assert generator_dependent_outputs(same, reseeded) == frozenset({"[2]"})
    assert generator_dependent_outputs(reserve, reserve + 1) is None  # nothing left to judge
    assert generator_dependent_outputs(same, None) is None
    assert generator_dependent_outputs(same, (out, states)) is None


def test_host_copy_shares_nothing_with_its_source():
    """The harness keeps eager's outputs as host copies: a CPU tensor must be cloned (its
    .cpu() is itself), and the copy must not follow later writes or hold autograd."""
    from opbench.judge.expectations import host_copy

    x = torch.arange(6.0, requires_grad=True)
    y = x * 2
    kept = host_copy(y)
    assert kept.untyped_storage().data_ptr() != y.untyped_storage().data_ptr()
    assert not kept.requires_grad
    with torch.no_grad():
        y.add_(1)
    assert torch.equal(kept, torch.arange(6.0) * 2)


def test_cudnn_convolutions_may_differ_between_runs_on_cuda_only():
    # aten's own convolution.default differed between two runs on identical inputs on
    # H100 and H200 (cuDNN is deterministic only under cudnn.deterministic, which no
    # worker sets); the CPU's is deterministic, and so are the ops not listed
    from opbench.judge.trial_rules import documented_nondeterministic

    for op in ("convolution.default", "convolution_backward.default"):
        overload = get_overload(op)
        assert documented_nondeterministic(op, overload, "cuda:0")
        assert not documented_nondeterministic(op, overload, "cpu")
    assert not documented_nondeterministic("mm.default", get_overload("mm.default"), "cuda:0")
