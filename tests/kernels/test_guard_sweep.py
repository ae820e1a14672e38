"""``benchmarks/reproduce/guard_sweep.py``'s two modes on the CPU, no traces: ``--stopped``
reports the journal a stopped sweep left beside ``--out`` and reads no traces, so it runs
without ``--traces``; a sweep reads them, and without ``--traces`` stops at the arguments
with a message that names it (it was required in both modes)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _main(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    """The script's ``main()`` on ``argv``; ``sys.path`` restored after (the script
    prepends ``benchmarks/reproduce`` and ``src`` on import)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "argv", ["guard_sweep.py", *argv])
    spec = importlib.util.spec_from_file_location(
        "guard_sweep", ROOT / "benchmarks/reproduce/guard_sweep.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main()


def test_stopped_reports_the_journal_without_traces(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "sweep.json"
    rows = [
        {"op": "mm.default", "index": 0, "args": "(T([2, 3], f16), T([3, 4], f16))",
         "status": "clean", "seconds": 0.5},
        {"op": "convolution.default", "index": 0, "args": "(T([1, 2, 5, 5], f16),)",
         "status": "raised", "message": "RuntimeError: not on a GPU", "seconds": 1.0},
    ]  # fmt: skip
    out.with_suffix(".jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert _main(monkeypatch, "--stopped", "--out", str(out)) == 0
    kept = json.loads(out.read_text())
    assert kept["summary"] == {"clean": 1, "raised": 1}
    assert [r["op"] for r in kept["rows"]] == ["convolution.default"]  # the clean row left out
    assert "not on a GPU" in out.with_suffix(".md").read_text()
    assert not out.with_suffix(".jsonl").exists()


def test_a_sweep_without_traces_is_an_argument_error(tmp_path: Path, monkeypatch, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        _main(monkeypatch, "--out", str(tmp_path / "sweep.json"))
    assert stop.value.code == 2
    assert "--traces is required to sweep" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # stopped before writing anything
