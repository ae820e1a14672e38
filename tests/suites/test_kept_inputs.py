"""``materialize.kept_inputs``: inside it a case's inputs for a seed are built once and
every later call gets a copy with the same values and layout (strides, offsets, storages
shared between arguments) in tensors of its own; outside it, nothing is kept."""

from __future__ import annotations

import pytest
import torch

from opbench.suites import materialize as mat
from opbench.suites.case import Case
from opbench.suites.inputs import NotRunnable

# a strided argument, a scalar; the second case shares one storage between two arguments
STRIDED = Case(op="add.Tensor", args="((T([4, 6], f32, stride=(1, 4)), T([6], f32)), {})")
ALIASED = Case(op="mul.Tensor", args="((T([8, 8], f32), T([8, 8], f32)), {})")


@pytest.fixture
def builds(monkeypatch):
    calls: list[int] = []
    real = mat._build

    def counted(case, device, seed):
        calls.append(seed)
        return real(case, device, seed)

    monkeypatch.setattr(mat, "_build", counted)
    return calls


def _tensors(built) -> list[torch.Tensor]:
    return mat.tensors_in(built)


def _same_inputs(a, b) -> None:
    ta, tb = _tensors(a), _tensors(b)
    assert len(ta) == len(tb) > 0
    for x, y in zip(ta, tb):
        assert torch.equal(x, y) and x.dtype == y.dtype
        assert x.stride() == y.stride() and x.storage_offset() == y.storage_offset()
        assert x.untyped_storage().data_ptr() != y.untyped_storage().data_ptr()


def test_a_seed_is_built_once_and_every_call_gets_its_own_copy(builds) -> None:
    fresh = mat.materialize(STRIDED, "cpu", 5)
    with mat.kept_inputs():
        first = mat.materialize(STRIDED, "cpu", 5)
        first[0][0].fill_(7.0)  # what a kernel does to its inputs stays in its copy
        again = mat.materialize(STRIDED, "cpu", 5)
        other = mat.materialize(STRIDED, "cpu", 6)
    assert builds == [5, 5, 6]  # the one outside, then one a seed inside
    _same_inputs(fresh, again)
    assert not torch.equal(_tensors(first)[0], _tensors(again)[0])
    assert not torch.equal(_tensors(other)[0], _tensors(again)[0])
    with mat.kept_inputs():  # a new block (the next test) keeps nothing of the last
        mat.materialize(STRIDED, "cpu", 5)
    assert builds == [5, 5, 6, 5]


def test_storages_shared_between_arguments_stay_shared_in_the_copy(monkeypatch) -> None:
    def aliased(case, device, seed):
        base = torch.arange(64.0).reshape(8, 8)
        return [base, base.t()], {}

    monkeypatch.setattr(mat, "_build", aliased)
    with mat.kept_inputs():
        mat.materialize(ALIASED, "cpu", 1)
        a, b = mat.materialize(ALIASED, "cpu", 1)[0]
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    assert torch.equal(b, a.t())


def test_outside_the_block_every_call_builds(builds) -> None:
    _same_inputs(mat.materialize(STRIDED, "cpu", 5), mat.materialize(STRIDED, "cpu", 5))
    assert builds == [5, 5]


def test_inputs_over_the_limit_are_built_each_time(builds, monkeypatch) -> None:
    monkeypatch.setattr(mat, "KEPT_INPUTS_MAX_BYTES", 64)  # under the 4x6 f32 input
    with mat.kept_inputs():
        a = mat.materialize(STRIDED, "cpu", 5)
        b = mat.materialize(STRIDED, "cpu", 5)
    assert builds == [5, 5]
    _same_inputs(a, b)


def test_a_case_that_cannot_be_built_raises_every_time(monkeypatch) -> None:
    def refuse(case, device, seed):
        raise NotRunnable("no valid index in [0, 0)")

    monkeypatch.setattr(mat, "_build", refuse)
    with mat.kept_inputs():
        for _ in range(2):
            with pytest.raises(NotRunnable):
                mat.materialize(STRIDED, "cpu", 5)


def test_inputs_that_carry_autograd_state_are_never_kept(builds, monkeypatch) -> None:
    def leaf(case, device, seed):
        builds.append(seed)
        return [torch.ones(3, requires_grad=True)], {}

    monkeypatch.setattr(mat, "_build", leaf)
    with mat.kept_inputs():
        a = mat.materialize(STRIDED, "cpu", 5)[0][0]
        b = mat.materialize(STRIDED, "cpu", 5)[0][0]
    assert builds == [5, 5] and a.is_leaf and b.is_leaf and a is not b
