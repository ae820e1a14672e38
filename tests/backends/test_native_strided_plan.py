"""The C++ gate's plan for broadcast and strided calls (``gate.cpp`` ``plan_strided``,
read through the extension's ``strided_plan``), on CPU tensors: where it takes a call,
eager's result is contiguous as the gate's is, the Python path would launch the same
strided kernel with the same integers, and those integers address every operand's
elements; where it leaves a call to Python, there is a reason.

The launches themselves need CUDA: tests/kernels/test_native_launch.py.
Slow: the extension builds on first use (about 20 s on 2 cores, cached after)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest
import torch

from opbench.backends.native import gate_module, unavailable_reason

pytestmark = pytest.mark.slow


def _pointwise() -> Any:
    """The Python path's planning (``opbench.kernels._lib.pointwise``), imported when a
    test runs: imported as this module is collected, the kernels would be decorated before
    tests/kernels/conftest.py sets TRITON_INTERPRET (which then refuses to run)."""
    from opbench.kernels._lib import pointwise

    return pointwise


def broadcast_shape(*operands: Any) -> tuple[int, ...]:
    from opbench.kernels._lib.pointwise_rules import broadcast_shape as rule

    return rule(*operands)


def destination(shape: tuple[int, ...], dtype: torch.dtype, operands: list[Any]) -> torch.Tensor:
    from opbench.kernels._lib.pointwise_rules import destination as rule

    return rule(shape, dtype, operands)


@pytest.fixture(scope="module")
def gate() -> Any:
    mp = pytest.MonkeyPatch()
    mp.setenv("OPBENCH_NATIVE", "1")
    module = gate_module()
    if module is None:
        pytest.fail(f"the C++ gate did not build: {unavailable_reason()}")
    yield module
    mp.undo()


def _python_plan(a: torch.Tensor, b: torch.Tensor | None, dest: torch.Tensor) -> Any:
    """``_pointwise()._strided_plan`` for the call, as the Python path plans it."""
    operands = [a] if b is None else [a, b]
    modes, tensors = _pointwise()._modes(operands, dest)
    return _pointwise()._strided_plan(tuple(dest.shape), modes, tensors, dest, dest.numel())


def _addresses(ints: list[int], t: torch.Tensor, k: int, shape: tuple[int, ...]) -> None:
    """Operand ``k``'s (0 a, 1 b, 3 out) strides in ``ints`` read ``t`` broadcast to
    ``shape`` in row-major order over the merged dims."""
    inner = ints[1] * ints[2] * ints[3]
    dims = [ints[0] // inner, *ints[1:4]]  # d0 is the element count over the rest
    strides = ints[4 + 4 * k : 8 + 4 * k]
    view = torch.as_strided(t, dims, strides, t.storage_offset())
    torch.testing.assert_close(view.reshape(-1), t.expand(shape).reshape(-1), rtol=0, atol=0)


def _check_taken(gate: Any, a: torch.Tensor, b: torch.Tensor | None, inplace: bool) -> None:
    plan = gate.strided_plan(a, b, inplace)
    assert plan is not None
    shape, ints, ndim, idx64 = plan
    operands = [a] if b is None else [a, b]
    assert tuple(shape) == broadcast_shape(*operands)
    if inplace:
        dest = a
        eager = a.clone().add_(b) if b is not None else a.clone().neg_()
        assert eager is not None  # eager takes the in-place call (no overlap error)
    else:
        eager = torch.add(a, b) if b is not None else torch.neg(a)
        assert eager.is_contiguous(), "eager keeps a layout the gate's contiguous result lacks"
        dest = destination(tuple(shape), a.dtype, operands)
        assert dest.is_contiguous(), "the Python path's result is not contiguous"
    python = _python_plan(a, b, dest)
    assert python is not _pointwise()._SPLIT
    p_ints, p_idx, p_ndim = python[0], python[1], python[2]
    assert list(p_ints) == list(ints)
    assert p_ndim == ndim and (p_idx is _pointwise().tl.int64) == idx64
    _addresses(ints, a, 0, tuple(shape))
    if b is not None:
        _addresses(ints, b, 1, tuple(shape))
    # the output's strides write a contiguous result (or self) in the same order
    _addresses(ints, dest if inplace else torch.randn(shape), 3, tuple(shape))


def _t(*shape: int) -> torch.Tensor:
    return torch.randn(shape)


#: (name, a and b, in place) the gate must take: the traced models' broadcast and sliced
#: calls, and their in-place forms
TAKEN: list[tuple[str, Callable[[], tuple[torch.Tensor, torch.Tensor | None]], bool]] = [
    (
        "a row of each: [16, 128, 768] / [16, 128, 1]",
        lambda: (_t(16, 128, 768), _t(16, 128, 1)),
        False,
    ),
    ("a bias: [8, 197, 768] + [768]", lambda: (_t(8, 197, 768), _t(768)), False),
    ("self broadcasts: [1, 64] + [32, 64]", lambda: (_t(1, 64), _t(32, 64)), False),
    ("a column slice: exp of [5000, 4][:, 0]", lambda: (_t(5000, 4)[:, 0], None), False),
    ("a sliced last dim", lambda: (_t(2, 1, 1, 16, 64)[:, :, :, :1, :], None), False),
    ("both sliced", lambda: (_t(64, 96)[:, :80], _t(64, 100)[:, 10:90]), False),
    ("a broadcast mask-like operand", lambda: (_t(4, 12, 64, 64), _t(4, 1, 1, 64)), False),
    ("in place, a row", lambda: (_t(16, 128, 768), _t(16, 128, 1)), True),
    ("in place on a slice", lambda: (_t(64, 96)[:, :80], _t(80)), True),
    ("in place with itself", lambda: (lambda x: (x, x))(_t(64, 96)[:, :80]), True),
    ("a 0-dim-free 1-D", lambda: (_t(7), _t(1)), False),
]


@pytest.mark.parametrize("case", range(len(TAKEN)), ids=[c[0] for c in TAKEN])
def test_the_gate_takes_broadcast_and_sliced_calls_as_the_python_path_plans_them(gate, case):
    _, make, inplace = TAKEN[case]
    a, b = make()
    _check_taken(gate, a, b, inplace)


def _overlapping() -> tuple[torch.Tensor, torch.Tensor]:
    base = _t(200)
    return base[:100], base[50:150]


#: (name, a and b, in place) the gate leaves to Python, and why
LEFT: list[tuple[str, Callable[[], tuple[torch.Tensor, torch.Tensor | None]], bool]] = [
    ("transposed: eager keeps the layout", lambda: (_t(64, 32).t(), None), False),
    ("transposed other: eager follows it", lambda: (_t(32, 64), _t(64, 32).t()), False),
    (
        "channels-last: eager keeps it",
        lambda: (_t(2, 8, 4, 4).to(memory_format=torch.channels_last), None),
        False,
    ),
    ("not broadcastable: Python raises eager's error", lambda: (_t(3, 4), _t(5, 4)), False),
    ("no operand of the result's shape", lambda: (_t(8, 1), _t(1, 8)), False),
    ("an empty result: nothing to launch", lambda: (_t(1, 4), _t(0, 4)), False),
    ("in place, self would broadcast", lambda: (_t(1, 64), _t(32, 64)), True),
    ("in place, self overlaps itself", lambda: (_t(1).expand(64), _t(64)), True),
    ("in place, other overlaps self in part", _overlapping, True),
    (
        "more than four merged dims: Python splits the launch",
        lambda: (_t(3, 5, 7, 9, 11)[:, :4, :6, :8, :10], None),
        False,
    ),
]


@pytest.mark.parametrize("case", range(len(LEFT)), ids=[c[0] for c in LEFT])
def test_the_gate_leaves_other_calls_to_python(gate, case):
    _, make, inplace = LEFT[case]
    a, b = make()
    assert gate.strided_plan(a, b, inplace) is None


def _layouts(rng: random.Random, shape: tuple[int, ...]) -> torch.Tensor:
    """A tensor of ``shape``: contiguous, sliced, permuted or expanded."""
    kind = rng.choice(["contiguous", "sliced", "permuted", "expanded"])
    if kind == "sliced":
        big = torch.randn([s + rng.randint(0, 2) for s in shape])
        return big[tuple(slice(0, s) for s in shape)]
    if kind == "permuted" and len(shape) > 1:
        order = list(range(len(shape)))
        rng.shuffle(order)
        inv = sorted(range(len(shape)), key=order.__getitem__)
        return torch.randn([shape[i] for i in order]).permute(inv)
    if kind == "expanded":
        return torch.randn([1 if rng.random() < 0.5 else s for s in shape]).expand(shape)
    return torch.randn(shape)


def test_random_layouts_are_planned_as_python_plans_them_or_left_to_python(gate):
    """Over random shapes and layouts: every call the gate takes passes _check_taken, and
    every call it leaves has a layout eager keeps, an overlap, or more than four dims."""
    rng = random.Random(20261130)
    taken = left = 0
    for _ in range(400):
        nd = rng.randint(1, 5)
        shape = tuple(rng.choice([1, 2, 3, 5, 8]) for _ in range(nd))
        a = _layouts(rng, shape)
        b_shape = tuple(1 if rng.random() < 0.3 else s for s in shape[rng.randint(0, nd - 1) :])
        b = _layouts(rng, b_shape) if rng.random() < 0.8 else None
        for inplace in (False, True):
            if gate.strided_plan(a, b, inplace) is not None:
                _check_taken(gate, a, b, inplace)
                taken += 1
                continue
            left += 1
            if inplace:
                continue  # overlap rules: the listed cases above
            operands = [a] if b is None else [a, b]
            eager = torch.add(a, b) if b is not None else torch.neg(a)
            out = torch.empty(broadcast_shape(*operands))
            python = _python_plan(a, b, out)
            merged_dims = python is _pointwise()._SPLIT
            assert (
                not eager.is_contiguous()
                or merged_dims
                or any(t.stride(i) < t.stride(j) for t in operands
                       for i, j in itertools.combinations(range(t.dim()), 2)
                       if t.size(i) > 1 and t.size(j) > 1 and t.stride(i) > 0 and t.stride(j) > 0)
            ), (a.shape, a.stride(), None if b is None else (b.shape, b.stride()))  # fmt: skip
    assert taken > 100 and left > 50, (taken, left)
