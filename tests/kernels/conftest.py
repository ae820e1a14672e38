"""The reference Triton kernels run here on CPU tensors under Triton's interpreter, which
is chosen when a ``@triton.jit`` function is defined: set it before any test module
imports ``opbench.kernels._lib`` (workers do the same, :mod:`opbench.run.worker`).

``OPBENCH_KERNEL_DEVICE=cuda`` runs the same tests compiled on a GPU instead (the
interpreter hides compile errors and the compiled code's layouts): the tests' tensors
go to that device (``kernel_checks.DEVICE``) and eager's TF32 is turned off, so it is the
IEEE float32 baseline the run pins.

**The matrix is sampled on the CPU.** On a GPU every parametrized case runs. Under the
interpreter (tests/kernels took 5 min 34 s on 2 cores with every case, 57 s sampled
with the slow tests left out, 2026-11-27) each test function runs a covering
sample of its cases: every value of every parameter meets every dtype the function runs
with at least once, so every family (module), op and variant (``name``, ``case``,
``tiles``, a parametrized fixture, ...) keeps at least one case per dtype, and only the
combinations of layouts, shapes and other values are thinned. The sample is fixed: of the
cases that remain, the one covering the most (dtype, parameter=value) pairs not yet
covered is taken until every pair is, ties going to the smaller SHA-256 of the node id;
so the same subset runs every time and a new case changes only its own function's
sample. It is taken from what ``-k``, ``-m`` and named node ids selected, so narrowing a
run never loses a pair it selected (one or two named cases always run). The cases left
out are reported as deselected, and a line at the end of the run gives the counts.
``OPBENCH_KERNEL_MATRIX=full`` runs every case on the CPU too (minutes; the GPU run and
this are where the whole matrix is checked). Kernel tests marked ``slow`` (the GPU's
tile plans at interpreter scale, whole-backend runs) are left out of the default run on
the CPU only: see ``tests/conftest.py``."""

import hashlib
import os
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import torch

ON_GPU = os.environ.get("OPBENCH_KERNEL_DEVICE", "cpu").startswith("cuda")
MATRIX = os.environ.get("OPBENCH_KERNEL_MATRIX", "full" if ON_GPU else "sample")
if MATRIX not in ("full", "sample"):
    raise pytest.UsageError(f"OPBENCH_KERNEL_MATRIX={MATRIX!r}: use 'full' or 'sample'")

if ON_GPU:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
else:
    # Triton decides at decoration whether a kernel is interpreted: a test module collected
    # before this one that imports the kernels at module level leaves them compiled-mode
    # functions, and every kernel test after it fails with "Cannot call @triton.jit'd
    # outside of the scope of a kernel" (2026-11-30: 460 failures from one import)
    _early = sorted(m for m in sys.modules if m.startswith("opbench.kernels._lib."))
    if _early and os.environ.get("TRITON_INTERPRET") != "1":
        raise pytest.UsageError(
            f"{_early[0]} was imported before tests/kernels/conftest.py set TRITON_INTERPRET: "
            "a test module outside tests/kernels imports the kernels at module level; "
            "import them inside its tests"
        )
    os.environ.setdefault("TRITON_INTERPRET", "1")
    # as the harness does wherever it runs kernels under the interpreter
    from opbench.instrument.interpreter_rounding import install_if_interpreting

    install_if_interpreting()

_HERE = Path(__file__).parent
_COUNTS = pytest.StashKey[tuple[int, int]]()


def _pairs(item: pytest.Item) -> set[tuple[str, str, str]]:
    """What one case covers: (its dtypes, parameter, value) for each non-dtype parameter,
    or (its dtypes, '', '') when the dtype is its only parameter."""
    params = item.callspec.params  # type: ignore[attr-defined]
    dtypes = ",".join(str(v) for v in params.values() if isinstance(v, torch.dtype))
    rest = {(dtypes, k, repr(v)) for k, v in params.items() if not isinstance(v, torch.dtype)}
    return rest or {(dtypes, "", "")}


def covering_sample(cases: list[pytest.Item]) -> list[pytest.Item]:
    """A small set of the cases that covers every pair the full list covers: greedily
    the case that covers the most pairs not yet covered, ties going to the smaller
    SHA-256 of the node id."""
    order = sorted(cases, key=lambda c: hashlib.sha256(c.nodeid.encode()).digest())
    pairs = {id(c): _pairs(c) for c in order}
    uncovered = set().union(*pairs.values())
    kept = []
    while uncovered:
        best = max(order, key=lambda c: len(pairs[id(c)] & uncovered))  # first of the best
        kept.append(best)
        uncovered -= pairs[id(best)]
    return kept


@pytest.hookimpl(trylast=True)  # after -k, -m and --deselect
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if MATRIX == "full":
        return
    by_function: dict[tuple[Path, str], list[pytest.Item]] = defaultdict(list)
    for item in items:
        if _HERE in item.path.parents and hasattr(item, "callspec"):
            by_function[(item.path, item.nodeid.split("[", 1)[0])].append(item)
    total = sum(len(cases) for cases in by_function.values())
    keep = {id(c) for cases in by_function.values() for c in covering_sample(cases)}
    dropped = [i for cases in by_function.values() for i in cases if id(i) not in keep]
    if dropped:
        gone = {id(i) for i in dropped}
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if id(i) not in gone]
    config.stash[_COUNTS] = (total - len(dropped), total)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    if _COUNTS in config.stash and config.stash[_COUNTS][0] < config.stash[_COUNTS][1]:
        kept, total = config.stash[_COUNTS]
        terminalreporter.write_line(
            f"kernel matrix sampled on the CPU: {kept} of {total} parametrized kernel cases "
            "ran (every parameter value with every dtype; tests/kernels/conftest.py); "
            "OPBENCH_KERNEL_MATRIX=full runs them all"
        )
