"""``--executor ray`` on a local Ray started by the test (CPU only): the same verdicts as
the local executor, streamed into the same results store, crash budget included."""

from __future__ import annotations

from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'opbench[ray]')")

import worker_kernels  # noqa: E402

from opbench.run.session import RunRequest, run  # noqa: E402
from opbench.run.store import ResultStore  # noqa: E402

pytestmark = pytest.mark.slow

KERNELS = {
    **worker_kernels.KERNELS,
    "add__Tensor": """
        import torch

        def add__Tensor_kernel_impl(a, b, *, alpha=1):
            return torch.add(a, b, alpha=alpha)
    """,
}
TRACES = """\
Operator: aten.relu.default
cnt: 4, ((T([16, 8], f32),), {})
cnt: 3, ((T([33], f32),), {})
cnt: 2, ((T([2, 3, 4], f32),), {})
Operator: aten.neg.default
cnt: 4, ((T([8], f32),), {})
cnt: 3, ((T([9], f32),), {})
cnt: 2, ((T([10], f32),), {})
cnt: 1, ((T([11], f32),), {})
Operator: aten.add.Tensor
cnt: 1, ((T([8, 8], f32), T([8, 8], f32)), {})
"""


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    kernels = worker_kernels.write_kernel_dir(tmp_path / "kernels", KERNELS)
    traces = tmp_path / "traces.txt"
    traces.write_text(TRACES)
    return kernels, traces


def _req(kernels: Path, traces: Path, out: Path, executor: str) -> RunRequest:
    return RunRequest(
        suite=f"traces:{traces}",
        backend=str(kernels),
        perf=False,
        out=out,
        executor=executor,
        sandbox="auto",
        max_crashes_per_op=2,
        test_timeout_s=60,
    )


def test_ray_matches_local_and_streams_into_the_store(local_ray, tmp_path):
    kernels, traces = _setup(tmp_path)
    remote = run(_req(kernels, traces, tmp_path / "ray", "ray"))
    local = run(_req(kernels, traces, tmp_path / "local", "local"))
    for key in ("correctness_score", "tests", "ops", "not_tested"):
        assert remote[key] == local[key], key
    assert remote["tests"]["total"] == 8
    store = ResultStore(tmp_path / "ray" / "results.sqlite")
    results = {r.test_id: r for r in store.results()}
    store.close()
    assert len(results) == 8
    by_op = {}
    for r in results.values():
        by_op.setdefault(r.op, []).append((r.status, r.category))
    assert sorted(by_op["relu.default"]) == [("passed", None)] * 3
    assert sorted(by_op["neg.default"]) == [("failed", "crash")] * 2 + [("not_run", "crash")] * 2
    assert by_op["add.Tensor"] == [("failed", "calls_pytorch")]
    assert remote["sandbox"] == local["sandbox"]


def test_ray_resume_runs_only_what_is_missing(local_ray, tmp_path):
    kernels, traces = _setup(tmp_path)
    out = tmp_path / "run"
    first = run(_req(kernels, traces, out, "ray"))
    store = ResultStore(out / "results.sqlite")
    relu_ids = [r.test_id for r in store.results() if r.op == "relu.default"]
    store.remove(set(relu_ids[:2]))  # as if the run had been killed before these finished
    store.close()
    req = _req(kernels, traces, out, "ray")
    req.resume = True
    seen = []
    again = run(req, lambda kind, payload: seen.append(payload) if kind == "result" else None)
    assert sorted(r.test_id for r in seen) == sorted(relu_ids[:2])
    assert again["tests"] == first["tests"] and again["ops"] == first["ops"]


def _alive_slot_actors() -> int:
    from ray._private import state

    return sum(
        1
        for a in state.actors().values()
        if a.get("State") == "ALIVE" and "NodeWorkers" in str(a.get("ActorClassName"))
    )


def test_slot_actors_started_ahead_are_taken_by_the_slots_and_none_outlive_the_run(
    local_ray, tmp_path
):
    """A Ray run starts its slots' actors while it builds the suite, and the slots take
    those (the run notes one actor per slot, no more); every actor is gone when the run
    returns, also when a resumed run finds nothing left to do and never uses them."""
    kernels, traces = _setup(tmp_path)
    out = tmp_path / "run"
    first = run(_req(kernels, traces, out, "ray"))
    assert first["ray"]["actors"] == 2  # the test's Ray has 2 CPUs: 2 slots
    assert _alive_slot_actors() == 0
    req = _req(kernels, traces, out, "ray")
    req.resume = True
    again = run(req)
    assert again["tests"] == first["tests"]
    assert _alive_slot_actors() == 0


def test_a_slot_waits_for_an_actor_still_starting(local_ray, tmp_path):
    """take_started waits for an actor announced ahead rather than making another, and
    says None at once when none is coming."""
    import threading

    from opbench.run.pool import WorkerConfig
    from opbench.run.ray_executor import RayWorkerFactory

    factory = RayWorkerFactory(ray, WorkerConfig(backend="aten", device="cpu"), None, cuda=False)
    factory.expect(1)
    starter = threading.Thread(target=factory.start_actors, args=(1,))
    starter.start()
    actor, info = factory.take_started()  # blocks until the actor is up
    assert info["pid"] > 0 and actor is not None
    assert factory.take_started() is None
    starter.join()
    factory.close()
    ray.kill(actor)


def test_closing_while_an_actor_is_still_starting_waits_for_nothing(local_ray, tmp_path):
    """A run that ends (or is interrupted) while its actors still come up neither waits
    for them nor keeps them: a waiting slot is released at once, and the actor is killed
    when it arrives."""
    import threading
    import time

    from opbench.run.pool import WorkerConfig
    from opbench.run.ray_executor import RayWorkerFactory

    factory = RayWorkerFactory(ray, WorkerConfig(backend="aten", device="cpu"), None, cuda=False)
    factory.expect(1)
    starter = threading.Thread(target=factory.start_actors, args=(1,))
    starter.start()
    t0 = time.perf_counter()
    factory.close()
    assert factory.take_started() is None
    assert time.perf_counter() - t0 < 5
    starter.join(timeout=120)
    assert not starter.is_alive()
    time.sleep(1)  # ray.kill is asynchronous
    assert _alive_slot_actors() == 0
