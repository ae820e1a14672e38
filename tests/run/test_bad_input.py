"""Bad input to ``opbench run``: one clear error line, exit code 2, no traceback unless
``--debug``. Driven through the real typer app (CliRunner), in process."""

from __future__ import annotations

import os
import re

import pytest
from typer.testing import CliRunner

from opbench.cli import app
from opbench.run.session import RunRequest
from opbench.run.store import ResultStore

runner = CliRunner()


def _invoke(*args: str):
    return runner.invoke(app, ["run", "--no-perf", *args], env={"COLUMNS": "300"})


def _one_error(result) -> str:
    text = result.output
    assert "Traceback" not in text, text
    assert result.exit_code == 2, (result.exit_code, text)
    errors = [m.start() for m in re.finditer(r"error:", text)]
    assert len(errors) == 1, text
    return " ".join(text[errors[0] :].split())  # rich may wrap a long line


def test_malformed_trace_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("Operator: aten.relu.default\ncnt: x, ((T([4], f32),), {})\n")
    msg = _one_error(_invoke("--suite", f"traces:{bad}", "--out", str(tmp_path / "r")))
    assert "bad.txt, line 2" in msg


def test_bad_arguments_in_a_trace(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("Operator: aten.relu.default\ncnt: 1, ((T([4], f33),), {})\n")
    msg = _one_error(_invoke("--suite", f"traces:{bad}", "--out", str(tmp_path / "r")))
    assert "line 2" in msg and "f33" in msg


def test_binary_trace_file(tmp_path):
    bad = tmp_path / "bin.txt"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    msg = _one_error(_invoke("--suite", f"traces:{bad}", "--out", str(tmp_path / "r")))
    assert "UTF-8" in msg


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_trace_file(tmp_path):
    bad = tmp_path / "secret.txt"
    bad.write_text("Operator: aten.relu.default\ncnt: 1, ((T([4], f32),), {})\n")
    bad.chmod(0)
    msg = _one_error(_invoke("--suite", f"traces:{bad}", "--out", str(tmp_path / "r")))
    assert "secret.txt" in msg


def test_missing_trace_file(tmp_path):
    msg = _one_error(
        _invoke("--suite", f"traces:{tmp_path / 'nope.txt'}", "--out", str(tmp_path / "r"))
    )
    assert "nope.txt" in msg


def test_missing_kernel_dir(tmp_path):
    msg = _one_error(
        _invoke("--backend", str(tmp_path / "no-kernels"), "--out", str(tmp_path / "r"))
    )
    assert "no-kernels" in msg and "kernel directory" in msg


def test_unknown_op(tmp_path):
    msg = _one_error(_invoke("--ops", "relu,not_an_op", "--out", str(tmp_path / "r")))
    assert "not_an_op" in msg


def test_unknown_suite_and_sandbox_mode(tmp_path):
    assert "unknown suite" in _one_error(_invoke("--suite", "nosuch", "--out", str(tmp_path / "a")))
    msg = _one_error(_invoke("--sandbox", "strict", "--ops", "relu", "--out", str(tmp_path / "b")))
    assert "--sandbox" in msg


def test_resume_a_run_of_another_suite(tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    store = ResultStore(out / "results.sqlite")
    store.check_same_run(RunRequest(suite="traces:/somewhere/else.txt").identity())
    store.close()
    msg = _one_error(_invoke("--suite", "smoke", "--out", str(out), "--resume"))
    assert "holds a different run" in msg and "suite" in msg


def test_debug_shows_the_traceback(tmp_path):
    result = runner.invoke(
        app,
        ["--debug", "run", "--no-perf", "--suite", "nosuch", "--out", str(tmp_path / "r")],
        env={"COLUMNS": "300"},
    )
    assert result.exit_code != 0
    assert result.exception is not None and "unknown suite" in str(result.exception)
