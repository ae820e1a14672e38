"""The loop on program problems (``--suite programs:PATH``): the model is shown the
problem's source and asked for ``ModelNew``; a wrong answer gets the judge's category
back, a right one lands in ``OUT/best/<id>.py`` (a ``--candidates`` folder), judged once
more as a whole. End to end on CPU against the scripted chat-completions server."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from chat_server import ChatServer  # noqa: E402

pytest.importorskip("openai")
from opbench.agent.client import ChatClient, Endpoint  # noqa: E402
from opbench.agent.export import iter_attempts  # noqa: E402
from opbench.agent.loop import AgentOptions, run_agent  # noqa: E402
from opbench.programs.loader import ProblemError  # noqa: E402

PROBLEM = '''"""Scale then ReLU."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, features))

    def forward(self, x):
        return torch.relu(x * self.scale)


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16]
'''

WRONG = """```python
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(features))

    def forward(self, x):
        return torch.abs(x * self.scale)
```
"""
RIGHT = """Negative products must become zero:
```python
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(features))

    def forward(self, x):
        return torch.clamp_min(x * self.scale, 0.0)
```
"""


def _suite(tmp_path: Path) -> Path:
    root = tmp_path / "problems"
    (root / "level1").mkdir(parents=True)
    (root / "level1" / "1_scale_relu.py").write_text(PROBLEM)
    (root / "level1" / "2_unused.py").write_text(PROBLEM)
    return root


@pytest.mark.slow
def test_wrong_then_right_model_new_ends_in_best(tmp_path: Path) -> None:
    root = _suite(tmp_path)
    out = tmp_path / "agent"
    opts = AgentOptions(
        ops=["1_scale_relu"], out=out, suite=f"programs:{root}", device="cpu", attempts=3
    )
    with ChatServer([(200, WRONG), (200, RIGHT)]) as srv:
        client = ChatClient(Endpoint(base_url=srv.url, model="scripted"))
        summary = run_agent(opts, client)
        requests = list(srv.requests)
    r = summary["ops"]["level1/1_scale_relu"]
    assert r["correct"] and r["first_correct_attempt"] == 2 and len(requests) == 2
    task = requests[0]["messages"][1]["content"]
    assert "class ModelNew" in task and "self.scale = nn.Parameter" in task  # the problem
    assert "load_state_dict(strict=True)" in requests[0]["messages"][0]["content"]
    feedback = requests[1]["messages"][-1]["content"]
    assert "wrong_result" in feedback and "1_scale_relu" in feedback
    best = out / "best" / "level1" / "1_scale_relu.py"
    assert "clamp_min" in best.read_text()
    # best/ judged again as a candidates folder, over the asked problem only
    assert summary["best_run"]["correctness_score"] == 1.0
    final = json.loads((out / "summary.json").read_text())
    assert list(final["problems"]) == ["level1/1_scale_relu"]
    # training data: the problem's source is the reference
    rows = list(iter_attempts(out))
    assert [r["program"] for r in rows] == ["level1/1_scale_relu"] * 2
    assert "class Model" in rows[0]["reference"] and rows[1]["correct"]


def test_an_unknown_problem_is_named(tmp_path: Path) -> None:
    root = _suite(tmp_path)
    opts = AgentOptions(ops=["9_missing"], out=tmp_path / "a", suite=f"programs:{root}")
    with pytest.raises(ProblemError, match="9_missing"):
        run_agent(opts, ChatClient(Endpoint(base_url="http://127.0.0.1:9/v1", model="m")))
