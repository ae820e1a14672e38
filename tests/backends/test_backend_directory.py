"""The directory backend: BackendBench layout, versions, variants, load errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from kernel_dirs import NUMPY_KERNELS, write_dir

from opbench.backends.aten import AtenBackend
from opbench.backends.directory import DirectoryBackend
from opbench.backends.loader import BackendError, load_backend


def test_loads_and_derives_variants(tmp_path: Path) -> None:
    be = load_backend(str(write_dir(tmp_path, NUMPY_KERNELS)), "cpu")
    assert isinstance(be, DirectoryBackend)
    assert be.load_errors == {}
    served = be.served_ops()
    # explicit overload folders and their derived in-place / out= variants
    assert {
        "add.Tensor",
        "add_.Tensor",
        "add.out",
        "mul.Tensor",
        "mul_.Tensor",
        "mul.out",
    } <= served
    # the bare relu folder serves every overload and variant of relu
    assert {"relu.default", "relu_.default", "relu.out"} <= served
    assert "add.Scalar" not in served and "leaky_relu.default" not in served
    assert "derived from add__Tensor" in be.coverage_note("add_.Tensor")

    x, y = torch.randn(4, 3), torch.randn(4, 3)
    torch.testing.assert_close(be.kernel_for("add.Tensor")(x, y, alpha=2), x + 2 * y)
    z = x.clone()
    assert be.kernel_for("add_.Tensor")(z, y) is z
    torch.testing.assert_close(z, x + y)
    out = torch.empty(0)
    assert be.kernel_for("add.out")(x, y, out=out) is out
    torch.testing.assert_close(out, x + y)
    torch.testing.assert_close(be.kernel_for("relu.default")(x), torch.relu(x))
    with pytest.raises(NotImplementedError):
        be.kernel_for("add.Tensor")(x.double(), y.double())


def test_a_bare_inplace_folder_wins_over_the_derived_variant(tmp_path: Path) -> None:
    """``relu_`` beside ``relu`` is the in-place op's own kernel: deriving relu_ from
    relu would run the functional kernel and copy, one more pass over memory."""
    files = dict(NUMPY_KERNELS)
    files["relu_/relu__implementation.py"] = (
        "import torch\n"
        "CALLS = []\n"
        "def relu__kernel_impl(x):\n"
        "    CALLS.append(1)\n"
        "    x.copy_(torch.from_numpy(x.numpy().clip(min=0)))\n"
        "    return x\n"
    )
    be = load_backend(str(write_dir(tmp_path, files)), "cpu")
    assert be.coverage_note("relu_.default") == "relu_/relu__implementation.py"
    assert "derived from relu/" in be.coverage_note("relu.out")
    x = torch.randn(5)
    z = x.clone()
    assert be.kernel_for("relu_.default")(z) is z
    torch.testing.assert_close(z, torch.relu(x))
    assert be.kernel_for("relu_.default").__module__ != be.kernel_for("relu.default").__module__


def test_every_problem_is_reported_and_the_rest_loads(tmp_path: Path) -> None:
    files = dict(NUMPY_KERNELS)
    files["sub__Tensor/sub__Tensor_implementation.py"] = "def sub__Tensor_kernel_impl(a, b:\n"
    files["div__Tensor/div__Tensor_implementation.py"] = "import not_a_module_xyz\n"
    files["neg/neg_implementation.py"] = "def negate(x):\n    return -x\n"
    files["not_an_op_at_all/not_an_op_at_all_implementation.py"] = "x = 1\n"
    files["exp/exp_implementation.py"] = "import sys\nsys.exit(3)\n"
    (tmp_path / "sin").mkdir()
    be = DirectoryBackend(write_dir(tmp_path, files), "cpu")
    errs = be.load_errors
    assert (
        "syntax error" in errs["sub__Tensor"]
        and "sub__Tensor_implementation.py" in errs["sub__Tensor"]
    )
    assert "ModuleNotFoundError" in errs["div__Tensor"]
    assert "no function neg_kernel_impl" in errs["neg"]
    assert "no ATen op" in errs["not_an_op_at_all"]
    assert "SystemExit" in errs["exp"]
    assert "no sin_implementation" in errs["sin"]
    assert "add.Tensor" in be.served_ops() and "relu.default" in be.served_ops()


def test_highest_version_wins_and_kernel_version_picks(tmp_path: Path) -> None:
    for v in (2, 10):
        write_dir(
            tmp_path,
            {
                f"neg/neg_implementation_v{v}.py": f"def neg_kernel_impl(x):\n    return x * 0 + {v}\n"
            },
        )
    x = torch.zeros(2)
    assert DirectoryBackend(tmp_path).kernel_for("neg.default")(x).tolist() == [10.0, 10.0]
    be = DirectoryBackend(tmp_path, kernel_version="v2")
    assert be.kernel_for("neg.default")(x).tolist() == [2.0, 2.0]
    be = DirectoryBackend(tmp_path, kernel_version="v7")
    assert be.kernel_for("neg.default")(x).tolist() == [10.0, 10.0]
    assert "not found" in be.coverage_note("neg.default")


def test_supports_function_declines(tmp_path: Path) -> None:
    write_dir(
        tmp_path,
        {
            "neg/neg_implementation.py": (
                "def neg_kernel_impl(x):\n    return -x\n\n"
                "def neg_supports(x):\n    return x.dim() == 1\n"
            )
        },
    )
    k = DirectoryBackend(tmp_path).kernel_for("neg.default")
    assert k(torch.ones(2)).tolist() == [-1.0, -1.0]
    with pytest.raises(NotImplementedError):
        k(torch.ones(2, 2))
    with pytest.raises(NotImplementedError):  # derived variants decline too
        DirectoryBackend(tmp_path).kernel_for("neg_.default")(torch.ones(2, 2))


def test_explicit_variant_folder_beats_derived(tmp_path: Path) -> None:
    write_dir(
        tmp_path,
        {
            "neg/neg_implementation.py": "def neg_kernel_impl(x):\n    return -x\n",
            "neg___default/neg___default_implementation.py": (
                "def neg___default_kernel_impl(x):\n    x.fill_(7)\n    return x\n"
            ),
        },
    )
    be = DirectoryBackend(tmp_path)
    x = torch.ones(2)
    assert be.kernel_for("neg_.default")(x).tolist() == [7.0, 7.0]
    assert be.coverage_note("neg_.default") == "neg___default/neg___default_implementation.py"


def test_bad_specs_raise_backend_error(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="does not exist"):
        load_backend(str(tmp_path / "missing"), "cpu")
    with pytest.raises(BackendError, match="unknown backend"):
        load_backend("nonsense", "cpu")
    with pytest.raises(BackendError, match="module"):
        load_backend("module:", "cpu")
    with pytest.raises(BackendError, match="cannot import"):
        load_backend("module:no_such_pkg_xyz", "cpu")


def test_aten_backend_serves_every_overload() -> None:
    be = load_backend("aten", "cpu")
    assert isinstance(be, AtenBackend)
    assert be.kernel_for("add.Tensor") is torch.ops.aten.add.Tensor
    assert be.kernel_for("sum.SymInt") is torch.ops.aten.sum.dim_IntList
    assert be.kernel_for("not_an_op.x") is None
    assert len(be.served_ops()) > 2000
