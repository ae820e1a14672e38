"""What the default ``pytest`` run leaves out: tests marked ``slow``.

The default run (``python -m pytest -q -n 2``, what a developer types: two processes,
pytest-xdist) stays under 5 minutes on 2 CPU cores (2:52-2:59 on 2026-11-28; one process
5:12-6:36); ``.ci/run`` runs it, then the slow tests as a second pass
(``python -m pytest -q -n 2 -m slow``), so CI runs every test. A test is marked ``slow`` when
it takes more than about 1.5 s on that machine, or its cases 3 s together, and is not one
of the end-to-end checks kept in the default run on purpose: the adversarial corpus run
(``tests/adversarial/test_corpus.py``), the neighbour corpus and the docs' commands.

Slow tests run when you ask for them: any ``-m`` expression (``-m slow``, or
``-m "slow or not slow"`` for everything), or a test named on the command line
(``path::test`` or ``path::test[case]``). Kernel tests marked ``slow`` are slow under
Triton's interpreter only: with ``OPBENCH_KERNEL_DEVICE=cuda`` they run by default.
The kernel tests' dtype/layout/shape matrix is sampled on the CPU besides, see
``tests/kernels/conftest.py``."""

import os
import random
import shutil
import sys
import tempfile
import zlib
from pathlib import Path

import pytest

# The C++ gate (opbench.backends.native) is built on first use, about 20 s on this
# machine: the default run registers backends on their Python path alone, and the gate's
# own tests (tests/backends/test_native_gate.py, slow; tests/kernels/test_native_launch.py
# on a GPU) turn it on.
os.environ.setdefault("OPBENCH_NATIVE", "0")

_KERNELS = Path(__file__).parent / "kernels"
_KERNELS_ON_GPU = os.environ.get("OPBENCH_KERNEL_DEVICE", "cpu").startswith("cuda")


def _named(config: pytest.Config) -> list[str]:
    """The node ids named on the command line (``path::test``, ``path::test[case]``)."""
    named = []
    for arg in config.args:
        path, sep, rest = arg.partition("::")
        if sep:
            full = (config.invocation_params.dir / path).resolve()
            if full.is_relative_to(config.rootpath):
                named.append(f"{full.relative_to(config.rootpath).as_posix()}::{rest}")
    return named


def _left_out(item: pytest.Item, named: list[str]) -> bool:
    if item.get_closest_marker("slow") is None:
        return False
    if _KERNELS_ON_GPU and _KERNELS in item.path.parents:
        return False
    return not any(item.nodeid == n or item.nodeid.startswith((f"{n}[", f"{n}::")) for n in named)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.option.markexpr:  # the user chose with -m
        return
    named = _named(config)
    slow = [item for item in items if _left_out(item, named)]
    if slow:
        config.hook.pytest_deselected(items=slow)
        gone = {id(item) for item in slow}
        items[:] = [item for item in items if id(item) not in gone]


@pytest.fixture(autouse=True)
def _seeded_per_test(request: pytest.FixtureRequest) -> None:
    """Seed torch's and Python's global generators from the test's node id before each
    test: an unseeded ``torch.randn`` otherwise draws whatever the tests before it in the
    same xdist process left, so a case near a tolerance passed or failed by the order of
    the run (an f32 row sum 1.37e-5 off against 1.35e-5 allowed, CI on 2026-11-29). With
    this, a failure is drawn again by running the one test."""
    seed = zlib.crc32(request.node.nodeid.encode()) % 2**31
    random.seed(seed)
    if "torch" in sys.modules:  # tests that never import torch need not pay for it
        sys.modules["torch"].manual_seed(seed)


#: What a test must never write: the package's sources and fitted data, and the committed
#: results. A fitter test whose redirect missed the fitter's new data path wrote its
#: 3-point toy fit over the matmul shape rule's data (2026-12-02) and CI passed.
_GUARDED = [Path(__file__).parents[1] / "src" / "opbench",
            Path(__file__).parents[1] / "benchmarks" / "results"]  # fmt: skip


def _snapshot() -> dict[str, tuple[int, int]]:
    """(modification time, size) of every guarded file (compiled caches left out)."""
    out = {}
    for root in _GUARDED:
        for path in root.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".so":
                st = path.stat()
                out[str(path)] = (st.st_mtime_ns, st.st_size)
    return out


@pytest.fixture(scope="session", autouse=True)
def _sources_untouched():
    """Fail the run (an error at the last test's teardown) if a test created, changed or
    deleted a file of the package or of the committed results."""
    before = _snapshot()
    yield
    after = _snapshot()
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    assert not changed, f"tests wrote into the repository: {changed[:10]}"


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray with two CPUs for one test module (Ray's tests skip without Ray)."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'opbench[ray]')")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    tmp = tempfile.mkdtemp(prefix="opray", dir="/tmp")  # Ray's socket paths must stay short
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=tmp, log_to_driver=False)
    yield
    ray.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)
