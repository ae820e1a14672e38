"""``agent-export --inductor-baseline``: per operator of an agent run, the code Inductor
generates for it beside the model's attempts (C++ here on the CPU, Triton on CUDA)."""

import json
from pathlib import Path

import pytest

from opbench.agent.export import write_jsonl


@pytest.mark.slow
def test_export_adds_inductors_code_per_operator(tmp_path: Path) -> None:
    pytest.importorskip("torch._inductor")
    out = tmp_path / "agent"
    rec = out / "records" / "relu__default"
    rec.mkdir(parents=True)
    (rec / "attempt_1.json").write_text(
        json.dumps({"attempt": 1, "answer": "x", "code": "def f(): pass", "result": {}})
    )
    (out / "agent.json").write_text(json.dumps({"suite": "smoke", "dsl": "triton"}))
    dest = tmp_path / "rows.jsonl"
    assert write_jsonl(out, dest, inductor_device="cpu") == 2
    attempt, baseline = (json.loads(line) for line in dest.read_text().splitlines())
    assert attempt["op"] == "relu.default" and "baseline" not in attempt
    assert baseline["baseline"] == "inductor" and baseline["op"] == "relu.default"
    assert baseline["dsl"] == "inductor-cpp" and baseline["case"].startswith("((T([")
    assert "error" not in baseline, baseline.get("error")
    code = baseline["code"]
    assert "def call(" in code and "cpp_fused_relu" in code  # its generated relu kernel
