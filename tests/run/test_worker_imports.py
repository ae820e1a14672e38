"""The worker and the fork server's template never import judging code (``opbench.judge``):
a candidate that reads or patches a module can reach only instruments, never the rules
that decide its verdict (DESIGN.md, *Trust boundary*).

Runs what a worker runs, in a fresh interpreter: the template's steps, the worker's
imports, loading a backend, a correctness test and a timed pair through the real
functions; then lists the ``opbench.judge`` modules that got imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    from opbench.run import forkserver, worker
    for _name, step in forkserver.template_steps():
        step()
    from opbench.backends import loader
    from opbench.instrument import candidate, neighbours, timed, timing
    from opbench.instrument.records import TrialPlan
    from opbench.programs import instrument as programs_instrument  # noqa: F401
    from opbench.spec.judge_options import JudgeOptions
    from opbench.spec.ops import get_overload
    from opbench.suites.case import Case, timing_seeds
    from opbench.suites.materialize import materialize

    backend = loader.load_backend("aten", "cpu")
    case = Case(op="add.Tensor", args="((T([8, 8], f32), T([8, 8], f32)), {})")
    kernel = backend.kernel_for(case.op)
    watch = neighbours.NeighbourWatch()
    candidate.run_candidate(case, kernel, "cpu", JudgeOptions(), None, guard=True,
                            after_call=watch.look)
    seed, second = timing_seeds(case)
    last = []
    got = timing.time_pair(
        timed.keeping_timed(get_overload(case.op), [], None, None),
        timed.keeping_timed(kernel, last, None, None),
        lambda: materialize(case, "cpu", seed),
        "cpu",
        timing.TimingOptions(warmup_ms=1, budget_ms=5, host_budget_ms=5),
        alternate_args=lambda: materialize(case, "cpu", second),
        reference_window=watch.reference,
        look=watch.look,
    )
    timed.timed_outputs(last, "cpu")
    got.to_dict()
    print(sorted(m for m in sys.modules if m == "opbench.judge" or m.startswith("opbench.judge.")))
    """
)


@pytest.mark.slow
def test_no_judge_module_in_what_a_worker_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout


def _imported_by_main() -> set[str]:
    """The modules ``worker.main`` imports before candidate code (its import statements
    up to the first ``load_backend`` call), read from the source."""
    import ast
    import inspect

    from opbench.run import worker

    tree = ast.parse(textwrap.dedent(inspect.getsource(worker.main)))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:  # `from opbench.backends import directory` names a module
                full = f"{node.module}.{a.name}"
                found.add(full if _is_module(full) else node.module)
    # the program path and the settings pin are imported where they are used
    return {m for m in found if m != "opbench.programs.instrument"}


def _is_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def test_the_template_preloads_every_module_a_worker_imports() -> None:
    from opbench.run import worker

    missing = _imported_by_main() - set(worker.WORKER_MODULES) - {"opbench.run"}
    assert not missing, f"add to worker.WORKER_MODULES (the template preloads them): {missing}"


@pytest.mark.slow  # over 1.5 s on 2 cores (2026-11-28, --durations)
def test_a_fork_of_the_template_imports_nothing_more_before_the_candidate() -> None:
    script = textwrap.dedent(
        """
        import sys
        from opbench.run import forkserver
        for _name, step in forkserver.template_steps():
            step()
        before = set(sys.modules)
        from opbench.run import worker
        for name in worker.WORKER_MODULES:
            __import__(name)
        print(sorted(set(sys.modules) - before))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout
