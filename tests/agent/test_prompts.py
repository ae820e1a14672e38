"""Prompts for one operator, and reading the model's answer."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from opbench.agent.prompts import (
    NoCodeBlock,
    extract_code,
    feedback_message,
    load_template,
    task_messages,
)

TRACE = """\
Operator: aten.relu.default
cnt: 7, ((T([64, 128], f16),), {})
cnt: 2, ((T([32], f32),), {})
"""


def test_the_task_carries_the_contract_rules_shapes_and_an_example(tmp_path: Path) -> None:
    trace = tmp_path / "t.txt"
    trace.write_text(TRACE)
    system, user = task_messages("relu.default", traces=trace)
    assert system["role"] == "system" and user["role"] == "user"
    assert "No PyTorch compute" in system["content"] and "static scan" in system["content"]
    text = user["content"]
    assert "relu__default/relu__default_implementation.py" in text
    assert "relu(Tensor self) -> Tensor" in text  # the schema
    assert "T([64, 128], f16)" in text and "f16" in text  # real shapes and dtypes
    assert "non-contiguous" in text and "NaN" in text  # the edge cases
    assert "def abs__default_kernel_impl" in text  # an example for another op
    assert "relu_.default (derived)" in text  # the variants it serves


def test_user_templates_override_by_name(tmp_path: Path) -> None:
    (tmp_path / "system.md").write_text("You are terse.")
    system, user = task_messages("relu.default", templates=tmp_path)
    assert system["content"] == "You are terse."
    assert "relu(Tensor self)" in user["content"]  # the rest stay built-in
    with pytest.raises(ValueError, match="unknown DSL"):
        task_messages("relu.default", dsl="cobol")


def test_feedback_names_the_verdict_and_details() -> None:
    msg = feedback_message("relu.default", "wrong_result on 2 of 5 tests", "test 1: T([3], f32)")
    assert msg["role"] == "user" and "wrong_result on 2 of 5" in msg["content"]
    assert "T([3], f32)" in msg["content"]


def test_extract_code_takes_the_last_complete_block() -> None:
    answer = "First try:\n```python\nx = 1\n```\nBetter:\n```python\nx = 2\n```\nDone."
    assert extract_code(answer) == "x = 2\n"
    assert extract_code("```\ny = 3\n```") == "y = 3\n"
    with pytest.raises(NoCodeBlock):
        extract_code("no code here")
    with pytest.raises(NoCodeBlock):
        extract_code("```python\nunterminated = True\n")


@pytest.mark.slow
def test_the_example_kernel_is_correct_under_the_triton_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    src = load_template("example_triton.py")
    (tmp_path / "example.py").write_text(src)
    check = (
        "import torch, example\n"
        "x = torch.randn(3000)\n"
        "x[0] = float('nan'); x[1] = -float('inf')\n"
        "y = example.abs__default_kernel_impl(x)\n"
        "assert torch.equal(y.isnan(), x.abs().isnan())\n"
        "assert torch.equal(y.nan_to_num(), x.abs().nan_to_num())\n"
        "print('ok')\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]
