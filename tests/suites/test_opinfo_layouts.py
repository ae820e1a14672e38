"""Strided and special-value cases the quick OpInfo profile derives for elementwise ops.

``sample_inputs`` of ``tanh`` holds one contiguous 20x20 tensor: without the derived
cases, a kernel that reads its input as if it were contiguous passed the quick profile.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("expecttest")

from opbench.suites import opinfo, opinfo_extras, opinfo_inputs  # noqa: E402
from opbench.suites.materialize import materialize, tensors_in  # noqa: E402

#: Unary and binary ufuncs, each a UnaryUfuncInfo or BinaryUfuncInfo in op_db.
UFUNCS = [
    "tanh", "neg", "floor", "ceil", "sin", "exp", "abs",
    "add", "mul", "sub", "maximum", "div", "atan2", "pow",
]  # fmt: skip


@pytest.fixture(scope="module")
def f32_cases():
    return opinfo.build_opinfo_cases("cpu", "quick", dtypes=[torch.float32], opinfo_names=UFUNCS)


def _inputs(case, seed=None):
    """The tensor inputs (``out`` aside) a case makes from ``seed`` (default: its own)."""
    args, kwargs = materialize(case, "cpu", seed)
    return tensors_in((args, {k: v for k, v in kwargs.items() if k != "out"}))


def test_every_ufunc_group_gets_a_strided_and_a_nonfinite_input(f32_cases):
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo

    for (name, vtn), info in opinfo.opinfos_by_key().items():
        if name in UFUNCS:
            assert isinstance(info, (UnaryUfuncInfo, BinaryUfuncInfo)), (name, vtn)
    groups: dict = {}
    for c in f32_cases:
        if opinfo_extras._is_elementwise(c.params):
            groups.setdefault((c.op, c.params["variant"]), []).append(c)
    assert len(groups) >= 3 * len(UFUNCS) - 4, sorted(groups)  # functional, in-place, out=
    assert {"div.Tensor_mode", "pow.Tensor_Tensor_out", "pow_.Tensor", "atan2.out"} <= {
        op for op, _ in groups
    }
    lacking = []
    for key, group in sorted(groups.items()):
        inputs = [_inputs(c) for c in group]
        if not any(not t.is_contiguous() for ts in inputs for t in ts):
            lacking.append((key, "no non-contiguous input"))
        if not any(
            t.is_floating_point() and not torch.isfinite(t).all() for ts in inputs for t in ts
        ):
            lacking.append((key, "no NaN or Inf"))
    assert not lacking, lacking


def test_derived_cases_are_told_apart_and_keep_their_sample(f32_cases):
    by_key = {}
    for c in f32_cases:
        by_key.setdefault((c.op, c.params["variant"], c.params["index"]), []).append(c)
    tanh = by_key[("tanh.default", "functional", 0)]
    assert sorted(str(c.params.get("layout") or c.params.get("values")) for c in tanh) == [
        "None",
        "special",
        "strided",
    ]
    assert len({c.test_id for c in tanh}) == 3
    strided = next(c for c in tanh if c.params.get("layout") == "strided")
    assert strided.args == "((T([20, 20], f32, stride=(2, 40)),), {})"
    plain = next(c for c in tanh if not ({"layout", "values"} & set(c.params)))
    (a,), (b,) = _inputs(plain), _inputs(strided)
    assert torch.equal(a, b) and a.is_contiguous() and not b.is_contiguous()
    # sin is not tested by PyTorch on large floats (handles_large_floats=False)
    sin = by_key[("sin.default", "functional", 0)]
    assert {c.params.get("values") for c in sin} == {None, "nonfinite"}


def test_out_keeps_its_layout_and_inplace_self_is_strided(f32_cases):
    out_case = next(
        c for c in f32_cases if c.op == "tanh.out" and c.params.get("layout") == "strided"
    )
    args, kwargs = materialize(out_case, "cpu")
    assert not args[0].is_contiguous() and kwargs["out"].is_contiguous()
    inplace = next(
        c for c in f32_cases if c.op == "add_.Tensor" and c.params.get("layout") == "strided"
    )
    args, _ = materialize(inplace, "cpu")
    assert not args[0].is_contiguous() and _distinct_elements(args[0])
    # self and other are strided differently: indexing other with self's strides fails
    assert args[0].stride() != args[1].stride() and args[0].shape == args[1].shape
    expected = args[0] + args[1]
    torch.ops.aten.add_.Tensor(*args)  # the kernel writes through the strides
    assert torch.equal(args[0], expected)


def _distinct_elements(t: torch.Tensor) -> bool:
    """Whether no two elements of ``t`` share memory (PyTorch's own check answers "too
    hard" for non-dense tensors)."""
    offsets = torch.zeros((), dtype=torch.long)
    for size, stride in zip(t.shape, t.stride()):
        offsets = offsets.unsqueeze(-1) + torch.arange(size) * stride
    return offsets.unique().numel() == t.numel()


def test_special_values_reach_every_floating_input(f32_cases):
    case = next(
        c for c in f32_cases if c.op == "atan2.default" and c.params.get("values") == "special"
    )
    for seed in (0, 1, 2):
        inputs = _inputs(case, seed)
        assert len(inputs) == 2
        for t in inputs:
            assert torch.isnan(t).any() or torch.isinf(t).any()
    values = torch.cat([t.flatten() for t in _inputs(case)])
    assert (values.abs() == 1e30).any(), "large magnitudes are injected too"
    out_case = next(
        c for c in f32_cases if c.op == "atan2.out" and c.params.get("values") == "special"
    )
    _, kwargs = materialize(out_case, "cpu")
    assert torch.equal(kwargs["out"], torch.zeros_like(kwargs["out"]))  # out is left alone


@pytest.mark.slow
def test_derived_cases_are_bit_identical_when_made_twice(f32_cases):
    derived = [c for c in f32_cases if {"layout", "values"} & set(c.params)]
    assert len(derived) >= 2 * 3 * len(UFUNCS) - 8
    for case in derived:
        for seed in (case.seed, 987):
            first, second = materialize(case, "cpu", seed), materialize(case, "cpu", seed)
            a, b = tensors_in(first), tensors_in(second)
            assert len(a) == len(b)
            for x, y in zip(a, b):
                assert x is not y and x.data_ptr() != y.data_ptr()
                assert x.shape == y.shape and x.stride() == y.stride(), case.test_id
                assert x.storage_offset() == y.storage_offset()
                # the whole storage, gaps included: a kernel reading them sees the same bytes
                xs, ys = x.untyped_storage(), y.untyped_storage()
                assert bytes(xs) == bytes(ys), (case.op, case.params)


#: Run here and in a fresh interpreter: what a case's inputs are, storage bytes included.
_FINGERPRINT = """
import hashlib, json, sys
from opbench.suites.case import Case
from opbench.suites.materialize import materialize, tensors_in

def fingerprint(case_dict, seed):
    tensors = tensors_in(materialize(Case.from_dict(case_dict), "cpu", seed))
    return [
        [list(t.shape), list(t.stride()), t.storage_offset(),
         hashlib.sha256(bytes(t.untyped_storage())).hexdigest()]
        for t in tensors
    ]
"""


@pytest.mark.slow
def test_derived_cases_are_the_same_in_another_process(f32_cases):
    """The worker and the harness each make the inputs from the case's description."""
    import json
    import subprocess
    import sys

    derived = [
        c
        for c in f32_cases
        if c.op in ("tanh_.default", "atan2.out") and {"layout", "values"} & set(c.params)
    ]
    assert len(derived) == 4
    dicts = [c.to_dict() for c in derived]
    code = _FINGERPRINT + "print(json.dumps([fingerprint(d, 5) for d in json.load(sys.stdin)]))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(dicts),
        capture_output=True,
        text=True,
        check=True,
    )
    there = json.loads(done.stdout.strip().splitlines()[-1])
    namespace: dict = {}
    exec(_FINGERPRINT, namespace)
    assert there == [namespace["fingerprint"](d, 5) for d in dicts]


def test_aten_passes_the_derived_cases(f32_cases):
    from opbench.judge.evaluate import JudgeOptions, judge_in_process
    from opbench.spec.ops import get_overload

    options = JudgeOptions()
    bad = []
    derived = [c for c in f32_cases if {"layout", "values"} & set(c.params)]
    for case in derived:
        v = judge_in_process(case, get_overload(case.op), "cpu", options)
        if v.status != "passed" or v.weak:
            bad.append((case.op, case.params, v.status, v.category, v.message[:200]))
    assert not bad, bad[:5]


def test_layout_copies():
    t = torch.arange(6.0).reshape(2, 3)
    swapped = opinfo_inputs._strided_copy(t, swap_last=True)
    assert torch.equal(swapped, t) and swapped.stride() == (2, 4)
    plain = opinfo_inputs._strided_copy(t, swap_last=False)
    assert torch.equal(plain, t) and plain.stride() == (6, 2)
    gaps = plain.untyped_storage()
    assert torch.equal(torch.tensor([], dtype=t.dtype).set_(gaps)[1::2], torch.zeros(6))
    x, scalar = torch.rand(4), torch.tensor(2.0)
    out = opinfo_inputs._with_layout([x, scalar, x, 3])
    assert out[0] is out[2] and out[1] is scalar and out[3] == 3 and out[0].stride() == (2,)


_STRIDE_BLIND = """
    import numpy as np
    import torch


    def {name}_kernel_impl(x, *, out=None):
        a = x.detach().numpy()
        # reads x's memory as if x were contiguous
        dense = np.lib.stride_tricks.as_strided(a, a.shape, np.empty(a.shape, a.dtype).strides)
        return torch.from_numpy(np.ascontiguousarray(np.{fn}(dense)).astype(a.dtype))
"""

_HONEST = """
    import numpy as np
    import torch


    def {name}_kernel_impl(x, *, out=None):
        a = x.detach().numpy()
        return torch.from_numpy(np.ascontiguousarray(np.{fn}(a)).astype(a.dtype))
"""


@pytest.mark.slow
@pytest.mark.parametrize("honest", [False, True])
def test_quick_profile_catches_a_kernel_that_ignores_strides(tmp_path, honest):
    import textwrap

    from opbench.run.session import RunRequest, run
    from opbench.run.store import ResultStore

    text = _HONEST if honest else _STRIDE_BLIND
    kernels = tmp_path / "kernels"
    for name, fn in (("tanh", "tanh"), ("neg", "negative")):  # bare folders: every overload
        (kernels / name).mkdir(parents=True)
        source = textwrap.dedent(text.format(name=name, fn=fn))
        (kernels / name / f"{name}_implementation.py").write_text(source)
    out = tmp_path / "run"
    summary = run(
        RunRequest(
            suite="opinfo",
            backend=str(kernels),
            device="cpu",
            ops=["tanh", "neg", "tanh_", "neg_"],
            dtypes=["f32"],
            perf=False,
            out=out,
        )
    )
    store = ResultStore(out / "results.sqlite")
    try:
        results = list(store.results())
    finally:
        store.close()
    assert results
    failed = {(r.op, r.category) for r in results if r.status != "passed"}
    if honest:
        assert not failed, failed
        assert summary["correctness_score"] == 1.0
        return
    # every overload (functional, in-place, out=) of both ops fails its strided case
    ops = {r.op for r in results}
    assert ops >= {"tanh.default", "tanh_.default", "tanh.out", "neg.default", "neg_.default"}
    assert {op for op, category in failed if category == "wrong_result"} == ops, failed
    assert summary["correctness_score"] == 0.0
