"""The kernel-writing loop end to end on CPU, against a scripted chat-completions server
over a real socket: wrong then right, no code, a cheating kernel, resume, and an
unreachable endpoint."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from chat_server import ChatServer  # noqa: E402

pytest.importorskip("openai")
from opbench.agent.client import ChatClient, Endpoint  # noqa: E402
from opbench.agent.loop import AgentOptions, run_agent  # noqa: E402

WRONG = """Here is my kernel:
```python
import numpy as np
import torch


def relu__default_kernel_impl(self):
    a = self.detach().cpu().numpy()
    return torch.from_numpy(np.abs(a)).to(self.device)
```
"""
RIGHT = """Fixed: negative values become zero.
```python
import numpy as np
import torch


def relu__default_kernel_impl(self):
    a = self.detach().cpu().numpy()
    return torch.from_numpy(np.maximum(a, 0).astype(a.dtype)).to(self.device)
```
"""
CHEAT = """```python
import torch


def relu__default_kernel_impl(self):
    return torch.relu(self)
```
"""


def _options(out: Path, **kw) -> AgentOptions:
    return AgentOptions(ops=["relu.default"], out=out, suite="smoke", device="cpu", **kw)


@pytest.mark.slow
def test_wrong_then_right_ends_with_the_right_kernel_in_best(tmp_path: Path) -> None:
    out = tmp_path / "agent"
    with ChatServer([(200, WRONG), (200, RIGHT)]) as srv:
        client = ChatClient(Endpoint(base_url=srv.url, model="scripted"))
        summary = run_agent(_options(out, attempts=3), client)
        requests = list(srv.requests)
    r = summary["ops"]["relu.default"]
    assert r["correct"] and r["first_correct_attempt"] == 2 and len(requests) == 2
    best = out / "best" / "relu__default" / "relu__default_implementation.py"
    assert "np.maximum" in best.read_text()
    # the feedback the model got: the category and the failing test's inputs (trace format)
    feedback = requests[1]["messages"][-1]["content"]
    assert "wrong_result" in feedback and "T([" in feedback
    assert requests[1]["messages"][-2] == {"role": "assistant", "content": WRONG}
    assert summary["pass_at"] == {"1": 0.0, "2": 1.0, "3": 1.0}
    # best/ judged again as one backend, its summary in the usual schema
    assert summary["best_run"]["correctness_score"] == 1.0
    assert json.loads((out / "summary.json").read_text())["ops"]["aten.relu.default"]["correct"]
    record = json.loads((out / "records" / "relu__default" / "attempt_1.json").read_text())
    assert record["answer"] == WRONG and not record["result"]["correct"]
    assert record["tokens"]["completion"] > 0
    # the best directory loads as a backend: judged again, it is correct
    again = subprocess.run(
        [
            sys.executable, "-m", "opbench.cli", "run", "--suite", "smoke", "--backend",
            str(out / "best"), "--ops", "relu.default", "--no-perf", "--quiet", "--json",
            "--out", str(tmp_path / "check"),
        ],
        capture_output=True, text=True,
    )  # fmt: skip
    assert json.loads(again.stdout)["correctness_score"] == 1.0

    # --resume: stored answers and verdicts are reused, nothing is asked again
    with ChatServer([(500, "must not be asked")]) as srv:
        client = ChatClient(Endpoint(base_url=srv.url, model="scripted", max_retries=0))
        summary = run_agent(_options(out, attempts=3, resume=True), client)
        assert srv.requests == []
    assert summary["ops"]["relu.default"]["first_correct_attempt"] == 2

    # every attempt as a JSON line of training data
    jsonl = tmp_path / "attempts.jsonl"
    r = subprocess.run(
        [sys.executable, "-m", "opbench.cli", "agent-export", str(out), "--jsonl", str(jsonl)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [(x["attempt"], x["correct"]) for x in rows] == [(1, False), (2, True)]
    assert rows[0]["op"] == "relu.default" and "relu(Tensor self)" in rows[0]["schema"]
    assert "np.maximum" in rows[1]["code"] and "wrong_result" in rows[0]["verdict"] + str(
        rows[0]["failures"]
    )


@pytest.mark.slow
def test_no_code_and_cheating_answers_are_failures_with_their_reason(tmp_path: Path) -> None:
    out = tmp_path / "agent"
    with ChatServer([(200, "I cannot write this."), (200, CHEAT)]) as srv:
        client = ChatClient(Endpoint(base_url=srv.url, model="scripted"))
        summary = run_agent(_options(out, attempts=2), client)
        requests = list(srv.requests)
    attempts = summary["ops"]["relu.default"]["attempts"]
    assert attempts[0]["verdict"] == "no_code"
    assert "no complete" in requests[1]["messages"][-1]["content"]
    assert not attempts[1]["correct"] and "calls_pytorch" in attempts[1]["verdict"]
    assert not summary["ops"]["relu.default"]["correct"]
    assert not (out / "best" / "relu__default").exists()


@pytest.mark.slow
def test_an_unreachable_endpoint_stops_the_run_with_exit_2(tmp_path: Path) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = subprocess.run(
        [
            sys.executable, "-m", "opbench.cli", "agent", "--ops", "relu.default", "--model",
            "m", "--base-url", f"http://127.0.0.1:{port}/v1", "--retries", "0", "--suite",
            "smoke", "--out", str(tmp_path / "a"),
        ],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "unreachable" in r.stderr and str(port) in r.stderr


@pytest.mark.slow
def test_the_cli_prints_the_per_op_table(tmp_path: Path) -> None:
    with ChatServer([(200, RIGHT)]) as srv:
        r = subprocess.run(
            [
                sys.executable, "-m", "opbench.cli", "agent", "--ops", "relu.default",
                "--model", "scripted", "--base-url", srv.url, "--suite", "smoke",
                "--out", str(tmp_path / "a"),
            ],
            capture_output=True, text=True, env={**os.environ, "COLUMNS": "160"},
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "relu.default" in r.stdout and "✓" in r.stdout
    assert "1/1 operators correct" in r.stderr and "pass@k 1: 1.00" in r.stderr
    assert (tmp_path / "a" / "summary.json").exists()
