"""Inputs are the same bits whatever the intra-op thread count: the harness and a worker
(a Ray actor runs with one thread) must draw the same tensors, or a kernel that wrote
nothing is judged to have written its input (aten's own ``minimum.default`` was)."""

from __future__ import annotations

import pytest
import torch

from opbench.suites.case import Case
from opbench.suites.input_call import Kind, draw
from opbench.suites.materialize import materialize


@pytest.fixture
def restore_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def _with_threads(n: int, fn):
    torch.set_num_threads(n)
    return fn()


@pytest.mark.parametrize("kind", ["default", "positive", "special", "bounded"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_a_draw_past_the_grain_is_the_same_for_any_thread_count(kind, dtype, restore_threads):
    n = 100_003  # past torch's 32,768-element grain, with a tail

    def once() -> torch.Tensor:
        return draw(n, dtype, Kind(kind), torch.Generator().manual_seed(7))

    one, many = _with_threads(1, once), _with_threads(5, once)
    assert torch.equal(one.view(torch.uint8), many.view(torch.uint8))


def test_a_derived_softmax_output_is_the_same_for_any_thread_count(restore_threads):
    """``_softmax_backward_data`` takes softmax's output, derived from a drawn input."""
    case = Case(
        op="_softmax_backward_data.default",
        args="((T([8, 64, 512], f32), T([8, 64, 512], f32), 1, f32), {})",
    )

    def once() -> list[torch.Tensor]:
        args, _ = materialize(case, "cpu")
        return [a for a in args if isinstance(a, torch.Tensor)]

    one, many = _with_threads(1, once), _with_threads(5, once)
    assert all(torch.equal(a, b) for a, b in zip(one, many))
