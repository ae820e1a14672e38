"""The guard: which ATen calls count as delegating to PyTorch, and output type checks."""

from __future__ import annotations

import numpy as np
import torch

from opbench.instrument.observer import DispatchRecorder
from opbench.judge import guard


def record(fn, *args, targets=None):
    rec = DispatchRecorder(targets)
    with rec:
        out = fn(*args)
    return out, rec.calls


def test_recorder_sees_compute_called_inside():
    a, b = torch.randn(4), torch.randn(4)
    _, calls = record(lambda x, y: torch.add(x * 2, y), a, b)
    names = [c.name for c in calls]
    assert names == ["mul.Tensor", "add.Tensor"]
    g = guard.classify_calls("add.Tensor", calls)
    assert not g.ok and g.violations == {"mul.Tensor": 1, "add.Tensor": 1}
    assert "add.Tensor" in g.message()


def test_numpy_round_trip_is_plumbing_only():
    a = torch.randn(8)
    _, calls = record(lambda x: torch.from_numpy(np.sin(x.numpy())), a)
    g = guard.classify_calls("sin.default", calls)
    assert g.ok, g.violations


def test_allocation_views_and_copies_are_allowed_for_compute_ops():
    a = torch.randn(4, 6)

    def plumbing(x):
        y = torch.empty_like(x)
        z = x.t().contiguous().view(-1)
        w = x.to(torch.float64)
        acc = torch.zeros(3)
        y.copy_(x)
        return y, z, w, acc

    _, calls = record(plumbing, a)
    g = guard.classify_calls("mm.default", calls)
    assert g.ok, g.violations


def test_copies_are_the_work_of_data_movement_ops():
    a = torch.randn(4, 6)
    _, calls = record(lambda x: x.clone(), a)
    assert not guard.classify_calls("clone.default", calls).ok
    _, calls = record(lambda x: torch.cat([x, x]), a)
    assert not guard.classify_calls("cat.default", calls).ok


def test_one_copy_into_out_is_how_variants_are_derived():
    a, out = torch.randn(4), torch.empty(4)
    buf = torch.from_numpy(np.concatenate([a.numpy()]))
    _, calls = record(lambda o, r: o.copy_(r), out, buf, targets=[out])
    assert calls[-1].into_target
    assert guard.classify_calls("clone.out", calls).ok
    # a second copy into out is not the write-back
    _, calls2 = record(lambda o, r: (o.copy_(r), o.copy_(r)), out, buf, targets=[out])
    assert not guard.classify_calls("clone.out", calls2).ok
    # and a copy into some other tensor is the op's work
    other = torch.empty(4)
    _, calls3 = record(lambda o, r: o.copy_(r), other, buf, targets=[out])
    assert not guard.classify_calls("clone.out", calls3).ok


def test_pairs_from_the_worker_are_accepted():
    g = guard.classify_calls("add.Tensor", [("detach.default", False), ("add.Tensor", False)])
    assert g.violations == {"add.Tensor": 1}
    assert g.allowed == {"detach.default": 1}


class Sub(torch.Tensor):
    pass


def test_output_problems():
    assert guard.output_problems(torch.zeros(3)) == []
    assert guard.output_problems((torch.zeros(3), 2.0, None)) == []
    probs = guard.output_problems(torch.zeros(3).as_subclass(Sub))
    assert probs and "Sub" in probs[0]
    assert guard.output_problems(torch.empty(3, device="meta"))
    assert guard.output_problems([torch.zeros(1), torch.zeros(2, 2).to_sparse()])[0].startswith(
        "output[1]"
    )


def test_reference_kernel_and_copy_like():
    op = torch.ops.aten.add.Tensor
    assert guard.is_reference_kernel(op, op)
    assert not guard.is_reference_kernel(torch.add, op)
    assert not guard.is_reference_kernel(torch.ops.aten.sub.Tensor, op)
    assert guard.is_copy_like("clone.default")
    assert guard.is_copy_like("_to_copy.default")
    assert guard.is_copy_like("permute_copy.default")
    assert not guard.is_copy_like("add.Tensor")
