"""``opbench.Scorer``: source strings judged in warm, isolated workers."""

import threading

import pytest

import opbench

RIGHT = """
import numpy as np
import torch


def relu__default_kernel_impl(self):
    a = self.detach().cpu().numpy()
    return torch.from_numpy(np.maximum(a, 0).astype(a.dtype)).to(self.device)
"""
WRONG = RIGHT.replace("np.maximum(a, 0)", "np.abs(a)")
CHEAT = """
import torch


def relu__default_kernel_impl(self):
    return torch.relu(self)
"""
TAMPER = RIGHT + "\ntorch.set_num_threads(1)\n"
EXP = """
import numpy as np
import torch


def exp__default_kernel_impl(self):
    return torch.from_numpy(np.exp(self.detach().cpu().numpy())).to(self.device)
"""


@pytest.mark.slow
def test_right_wrong_cheating_and_tampering_sources() -> None:
    with opbench.Scorer(device="cpu", suite="smoke") as s:
        right = s.score(RIGHT, "relu.default")
        wrong = s.score(WRONG, "aten.relu.default")
        cheat = s.score(CHEAT, "relu.default")
        tamper = s.score(TAMPER, "relu.default")
        again = s.score(RIGHT, "relu.default")  # the same folder, rewritten: no stale code
        assert s.scored == 5
    assert right.correct and right.passed == right.tests > 0
    assert not wrong.correct and "wrong_result" in wrong.failures
    assert "T([" in wrong.messages[0]  # the failing inputs, in the trace format
    assert not cheat.correct and "calls_pytorch" in cheat.failures
    assert not tamper.correct and "tampering" in tamper.failures
    assert any(f["rule"] for f in tamper.scan)  # the static scan's finding
    assert again.correct


@pytest.mark.slow
def test_threads_score_different_ops_at_once() -> None:
    out: dict[str, bool] = {}
    with opbench.Scorer(device="cpu", suite="smoke", workers=2) as s:

        def run(src: str, op: str) -> None:
            out[op] = s.score(src, op).correct

        threads = [
            threading.Thread(target=run, args=(RIGHT, "relu.default")),
            threading.Thread(target=run, args=(EXP, "exp.default")),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert out == {"relu.default": True, "exp.default": True}


@pytest.mark.slow
def test_one_shot_score() -> None:
    assert not opbench.score(WRONG, "relu.default", suite="smoke").correct


SLOW = RIGHT.replace(
    "    a = self.detach()", "    import time\n\n    time.sleep(0.15)\n    a = self.detach()"
)


@pytest.mark.slow
def test_score_many_judges_one_op_at_once_across_lanes() -> None:
    """A batch of samples for one prompt: the same operator, judged concurrently in the
    scorer's lanes, each sample in a worker (and a kernel folder) of its own; the
    verdicts come back in the batch's order."""
    batch = [(SLOW, "relu.default"), (WRONG, "relu.default"), (SLOW, "relu.default"),
             (CHEAT, "relu.default")]  # fmt: skip
    with opbench.Scorer(device="cpu", suite="smoke", workers=2) as s:
        s.warm()  # every lane's template and spare
        s.score(RIGHT, "relu.default")  # the op's cases and expectations, built once
        s.reset_stats()
        verdicts = s.score_many(batch)
        stats = s.stats()
    assert [v.correct for v in verdicts] == [True, False, True, False]
    assert "wrong_result" in verdicts[1].failures and "calls_pytorch" in verdicts[3].failures
    assert stats["candidates"] == 4 and stats["lanes"] == 2
    assert stats["latency_p50_s"] <= stats["latency_p99_s"]
    assert 0 < stats["outside_tests_share"] < 1
    # the sleeping samples overlapped the others: the lanes' time adds up to more than
    # the time anything was being judged (one after another, the two would be equal)
    assert stats["lane_s"] > 1.3 * stats["busy_s"], stats


def test_gpu_workers_get_one_hardware_queue_and_two_spares(monkeypatch) -> None:
    """A GPU makes CUDA contexts one at a time, 2.3x faster with one hardware queue each
    (H100: 4.9 -> 11 contexts/s), and every candidate's worker makes one: GPU lanes ask
    for one queue unless the user chose, and start two spares; CPU lanes neither."""
    from opbench.agent.scorer import _spares, _worker_env

    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    assert _worker_env("opinfo", "cuda:1") == {
        "OPBENCH_PRELOAD": "opinfo",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    }
    assert _worker_env("traces", "cpu") == {}
    assert (_spares("cuda"), _spares("cpu")) == (2, 1)
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "8")  # the user's choice is kept
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in _worker_env("traces", "cuda")
