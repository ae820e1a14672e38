"""Kernel languages other than Triton: the C++ example (built with ``load_inline`` at
import) must load, build and pass inside the judge's sandboxed worker, as a model's C++
or CUDA answer would; a user's template folder adds a DSL (Helion, CuTe, ...)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

import opbench
from opbench.agent import prompts

TEMPLATES = Path(prompts.__file__).with_name("templates")


@pytest.mark.slow
def test_the_cpp_example_builds_and_passes_in_the_sandboxed_worker() -> None:
    if not (shutil.which("c++") or shutil.which("g++")) or not shutil.which("ninja"):
        pytest.skip("no C++ compiler or ninja (.ci/run installs g++ and ninja-build as root)")
    source = (TEMPLATES / "example_cpp.py").read_text()
    with opbench.Scorer(device="cpu", suite="opinfo", dtypes=["f32", "bf16", "i64"]) as s:
        verdict = s.score(source, "abs.default")
    assert verdict.correct, verdict.messages
    assert verdict.passed == verdict.tests > 0
    # the native build is reported for a person to review, not hidden
    assert any(f["rule"] == "native-extension" for f in verdict.scan)


def test_the_cuda_example_builds_and_passes_in_the_sandboxed_worker_on_a_gpu() -> None:
    """What a model's CUDA answer meets: nvcc and ninja inside the sandboxed worker, a
    writable build folder there, and the judge's CUDA cases."""
    import torch

    if not torch.cuda.is_available() or not shutil.which("nvcc") or not shutil.which("ninja"):
        pytest.skip("needs a CUDA GPU, nvcc and ninja (run on the lent GPU machine)")
    source = (TEMPLATES / "example_cuda.py").read_text()
    with opbench.Scorer(device="cuda", suite="opinfo", dtypes=["f32", "f16", "bf16"]) as s:
        verdict = s.score(source, "abs.default")
    # the example declines strided inputs (not_implemented); everything it serves passes
    assert verdict.passed > 0, verdict.messages
    assert verdict.failures.keys() <= {"not_implemented"}, verdict.messages
    assert any(f["rule"] == "native-extension" for f in verdict.scan)


def test_the_cuda_example_is_a_complete_kernel_file() -> None:
    """No nvcc or GPU here: the file must at least parse and define the entry point and a
    ``__global__`` kernel launched on PyTorch's current stream."""
    source = (TEMPLATES / "example_cuda.py").read_text()
    tree = ast.parse(source)
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "abs__default_kernel_impl" in names
    assert "__global__" in source and "getCurrentCUDAStream" in source


@pytest.mark.parametrize("dsl", ["cpp", "cuda"])
def test_cpp_and_cuda_prompts_say_how_to_build(dsl: str) -> None:
    messages = prompts.task_messages("relu.default", dsl=dsl, device="cuda")
    task = messages[1]["content"]
    assert "load_inline" in task
    assert prompts.DSLS[dsl] in task
    assert "relu__default_kernel_impl" in task
    assert "abs__default_kernel_impl" in task  # the example, for a different op


def test_a_user_folder_adds_a_dsl(tmp_path: Path) -> None:
    (tmp_path / "dsl_helion.md").write_text("# Helion (hl.kernel)\nUse hl.tile over {folder}.\n")
    (tmp_path / "example_helion.py").write_text("import helion\n# an example kernel\n")
    assert "helion" not in prompts.available_dsls()
    assert prompts.available_dsls(tmp_path)["helion"] == "Helion (hl.kernel)"
    task = prompts.task_messages("relu.default", dsl="helion", templates=tmp_path)[1]["content"]
    assert "Use hl.tile over relu__default." in task and "import helion" in task
    # notes without an example are not a DSL
    (tmp_path / "dsl_cute.md").write_text("CuTe notes")
    assert "cute" not in prompts.available_dsls(tmp_path)
    with pytest.raises(ValueError, match="dsl_cute.md and example_cute.py"):
        prompts.task_messages("relu.default", dsl="cute", templates=tmp_path)
