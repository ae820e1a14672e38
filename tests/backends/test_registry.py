"""Registration through torch.library: what models compute changes, and comes back."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from kernel_dirs import MARKED_KERNELS, NUMPY_KERNELS, write_dir

import opbench
from opbench.backends import registry


@pytest.fixture(autouse=True)
def _clean():
    yield
    registry.disable()


def _plain_results(x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    o = torch.empty(0)
    z = x.clone()
    r = x.clone()
    return {
        "torch.add": torch.add(x, y),
        "x + y": x + y,
        "x + 1.5": x + 1.5,
        "add_": z.add_(y),
        "out=": torch.add(x, y, out=o),
        "F.relu": F.relu(x),
        "F.relu inplace": F.relu(r, inplace=True),
    }


def test_marked_kernels_change_every_entry_point_and_go_away(tmp_path: Path) -> None:
    kdir = write_dir(tmp_path, MARKED_KERNELS)
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    before = _plain_results(x, y)
    with opbench.backend(kdir, device="cpu") as be:
        assert "add.Tensor" in be.served_ops()
        inside = _plain_results(x, y)
        counts = registry.call_counts()
    # compare outside the backend (while it is on, even assert_close would run on it)
    for key in ("torch.add", "x + y", "x + 1.5", "add_", "out="):
        torch.testing.assert_close(inside[key], before[key] + 100, msg=key)
    for key in ("F.relu", "F.relu inplace"):
        torch.testing.assert_close(inside[key], before[key] + 10, msg=key)
    assert counts["add.Tensor"]["served"] >= 3
    assert counts["add_.Tensor"]["served"] == 1 and counts["add.out"]["served"] == 1
    assert counts["relu.default"]["served"] == 1 and counts["relu_.default"]["served"] == 1
    # the marked add kernel calls torch.add itself: those calls reach PyTorch
    assert counts["add.Tensor"]["nested"] >= 3
    after = _plain_results(x, y)
    for key in before:
        assert torch.equal(after[key], before[key]), key


def test_removed_after_an_exception_in_the_block(tmp_path: Path) -> None:
    kdir = write_dir(tmp_path, MARKED_KERNELS)
    x = torch.ones(3)
    with pytest.raises(KeyError):
        with opbench.backend(kdir, device="cpu"):
            assert (x + x)[0].item() == 102.0
            raise KeyError("boom")
    assert (x + x).tolist() == [2.0, 2.0, 2.0]
    assert registry.active_backends() == []


def test_enable_disable(tmp_path: Path) -> None:
    kdir = write_dir(tmp_path, MARKED_KERNELS)
    x = torch.ones(2)
    opbench.enable(str(kdir), device="cpu")
    assert torch.relu(x).tolist() == [11.0, 11.0]
    opbench.disable()
    assert torch.relu(x).tolist() == [1.0, 1.0]
    assert registry.call_counts()["relu.default"]["served"] == 1


def test_numpy_kernels_match_pytorch_and_decline_falls_back(tmp_path: Path) -> None:
    kdir = write_dir(tmp_path, NUMPY_KERNELS)
    x, y = torch.randn(8), torch.randn(8)
    xd, yd = x.double(), y.double()
    with opbench.backend(kdir, device="cpu") as be:
        s32 = x + y
        s64 = xd + yd  # declined (f64): falls back to PyTorch
        m = x * y  # the kernel calls torch.mul itself: no infinite recursion
        counts = registry.call_counts()
    calls = be.kernels["add.Tensor"].fn.__globals__["CALLS"]
    torch.testing.assert_close(s32, torch.add(x, y))
    assert torch.equal(s64, torch.add(xd, yd))
    assert torch.equal(m, torch.mul(x, y))
    assert counts["add.Tensor"] == {"served": 1, "fallback": 1, "nested": 0, "declined": 0}
    assert len(calls) == 2
    assert counts["mul.Tensor"]["served"] == 1 and counts["mul.Tensor"]["nested"] == 1


def test_python_scalars_reach_the_fallback_with_pytorch_promotion(tmp_path: Path) -> None:
    write_dir(
        tmp_path,
        {
            "add__Tensor/add__Tensor_implementation.py": (
                "def add__Tensor_kernel_impl(self, other, *, alpha=1):\n"
                "    raise NotImplementedError\n"
            )
        },
    )
    cases = [
        (torch.ones(3, dtype=torch.float16), 1.5),
        (torch.ones(3, dtype=torch.int64), 2.5),
        (torch.ones(3, dtype=torch.int32), 3),
        (torch.tensor(2.0, dtype=torch.float16), 1e-3),
        (torch.ones(3, dtype=torch.bool), True),
    ]
    expected = [a + b for a, b in cases]
    with opbench.backend(tmp_path, device="cpu"):
        got = [a + b for a, b in cases]
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and torch.equal(g, e)


def test_nested_backends_stack(tmp_path: Path) -> None:
    a = write_dir(tmp_path / "a", MARKED_KERNELS)
    b = write_dir(
        tmp_path / "b",
        {
            "relu/relu_implementation.py": "import torch\ndef relu_kernel_impl(x):\n    return torch.relu(x) * 2\n"
        },
    )
    x = torch.ones(2)
    with opbench.backend(a, device="cpu"):
        with opbench.backend(b, device="cpu"):
            inner = torch.relu(x)  # b's kernel calls relu: reaches a's kernel below it
        outer = torch.relu(x)
    assert inner.tolist() == [22.0, 22.0]
    assert outer.tolist() == [11.0, 11.0]
    assert torch.relu(x).tolist() == [1.0, 1.0]


def test_autograd_still_works_through_registered_kernels(tmp_path: Path) -> None:
    kdir = write_dir(tmp_path, NUMPY_KERNELS)
    x = torch.randn(5, requires_grad=True)
    y = torch.randn(5, requires_grad=True)
    with opbench.backend(kdir, device="cpu"):
        (torch.relu(x + y) * y).sum().backward()
    gx, gy = x.grad.clone(), y.grad.clone()
    x.grad = y.grad = None
    (torch.relu(x + y) * y).sum().backward()
    torch.testing.assert_close(gx, x.grad)
    torch.testing.assert_close(gy, y.grad)
