"""Our own program problem set (``src/opbench/programs/problems``): every problem runs at
the small size, its FLOP and byte counts agree with what it computes and moves, its full
size fits the memory budget, and the whole set passes the problem lints."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from opbench.programs.inputs import tensors_of
from opbench.programs.lint import lint_problems, load_problem, unload_problem

PROBLEMS = Path(__file__).resolve().parents[2] / "src" / "opbench" / "programs" / "problems"
FILES = sorted(PROBLEMS.glob("level*/*.py"))
MINIMUM = {"level1": 30, "level2": 20, "level3": 8}
#: A full-size problem's inputs and parameters in float32: memory-bound problems need ~3 GB
#: of traffic for 1 ms on an H100; the runner's default cap there is 1/8 of its memory.
FULL_BYTES_LIMIT = 4 << 30


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@pytest.fixture
def problem(request: pytest.FixtureRequest) -> ModuleType:
    mod = load_problem(request.param)
    yield mod
    unload_problem(mod)


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def test_each_level_has_its_minimum_and_numbers_run_one_to_n() -> None:
    for level, minimum in MINIMUM.items():
        files = [f for f in FILES if f.parent.name == level]
        assert len(files) >= minimum, f"{level} has {len(files)} problems, wants {minimum}"
        numbers = sorted(int(f.name.split("_", 1)[0]) for f in files)
        assert numbers == list(range(1, len(files) + 1)), f"{level}: numbers {numbers}"
        assert all(re.fullmatch(r"\d{2}_[a-z0-9_]+\.py", f.name) for f in files)


@pytest.mark.parametrize("problem", FILES, ids=_id, indirect=True)
def test_problem_runs_small_and_its_counts_agree(problem: ModuleType) -> None:
    assert (problem.__doc__ or "").strip(), "a module docstring says what the problem is"
    assert set(problem.SIZES) == {"small", "full"}
    for fn in (problem.get_inputs, problem.get_init_inputs, problem.flops, problem.bytes_moved):
        assert inspect.signature(fn).parameters["size"].default == "full"
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs("small"))
    inputs = problem.get_inputs("small")
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        outs = tensors_of(model(*inputs))
    assert outs and all(torch.isfinite(o).all() for o in outs)
    for size in ("small", "full"):
        for count in (problem.flops(size), problem.bytes_moved(size)):
            assert type(count) is int and count > 0, (size, count)
    # bytes_moved is exactly the inputs, the parameters (float32) and the outputs
    params = [p.detach() for p in model.parameters()]
    assert problem.bytes_moved("small") == _nbytes(inputs) + _nbytes(params) + _nbytes(outs)
    # flops covers at least the matmuls and convolutions torch's counter sees
    assert problem.flops("small") >= counter.get_total_flops()


@pytest.mark.parametrize("problem", FILES, ids=_id, indirect=True)
def test_full_size_fits_and_is_the_default(problem: ModuleType) -> None:
    with torch.device("meta"):  # shapes only: nothing is allocated
        full = problem.get_inputs("full")
        default = problem.get_inputs()
        model = problem.Model(*problem.get_init_inputs())
    assert [t.shape for t in full] == [t.shape for t in default]
    assert problem.get_init_inputs() == problem.get_init_inputs("full")
    params = [p for p in model.parameters()]
    assert _nbytes(full) + _nbytes(params) < FULL_BYTES_LIMIT
    assert problem.flops() == problem.flops("full") > problem.flops("small")


@pytest.mark.slow
def test_the_whole_set_is_lint_clean_at_small_size() -> None:
    result = lint_problems(PROBLEMS, size="small")
    assert len(result.files) == len(FILES)
    assert not result.skipped
    assert not result.findings, "\n".join(
        f"{f.path}: {f.check} {f.message}" for f in result.findings
    )
