"""``opbench lint-problems``: small deliberately weak problems, each of which must be
flagged by the right check (and a sound one by none), and the command's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from opbench.programs.lint import lint_file, lint_problems, problem_files

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"

SOUND = (
    HEADER
    + """
class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)

    def forward(self, x, y):
        return self.linear(x) * y

SIZES = {"small": {"n": 8}, "full": {"n": 16}}

def get_inputs(size="full"):
    n = SIZES[size]["n"]
    return [torch.randn(4, n), torch.randn(4, n)]

def get_init_inputs(size="full"):
    return [SIZES[size]["n"]]
"""
)

# KernelBench style: no size parameter, sizes as module constants
KERNELBENCH_STYLE = (
    HEADER
    + """
class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)

N = 16

def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]

def get_init_inputs():
    return []
"""
)


def _simple(forward: str, inputs: str) -> str:
    """A weightless problem with the given forward body and get_inputs list."""
    return (
        HEADER
        + f"""
class Model(nn.Module):
    def forward(self, *args):
        {forward}

def get_inputs():
    return {inputs}

def get_init_inputs():
    return []
"""
    )


BAD = {
    # a batch-mean loss (KernelBench's hinge loss): about 1.0 whatever the inputs
    "constant_output": _simple(
        "p, t = args\n        return torch.mean(torch.clamp(1 - p * t, min=0))",
        "[torch.rand(256, 256), torch.randint(0, 2, (256, 256)).float() * 2 - 1]",
    ),
    "unused_input": _simple(
        "a, b = args\n        return a * 2", "[torch.randn(64), torch.randn(64)]"
    ),
    "tiny_output": _simple("return args[0] * 1e-4", "[torch.randn(64)]"),
    "random_forward": _simple(
        "return F.dropout(args[0], p=0.5, training=True)", "[torch.randn(256)]"
    ),
    "nonfinite_output": _simple("return torch.log(args[0] - 10)", "[torch.randn(64)]"),
    "run_error": _simple("raise RuntimeError('kernel exploded')", "[torch.randn(4)]"),
}


def _write(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(source)
    return path


def _checks(path: Path, size: str = "small") -> list[str]:
    findings, skipped = lint_file(path, size)
    assert skipped is None
    return [f.check for f in findings]


def test_a_sound_problem_has_no_findings(tmp_path: Path) -> None:
    assert _checks(_write(tmp_path, "sound.py", SOUND)) == []
    assert _checks(_write(tmp_path, "kb.py", KERNELBENCH_STYLE)) == []


@pytest.mark.parametrize("check", sorted(BAD))
def test_each_weak_problem_is_flagged_by_its_check_alone(tmp_path: Path, check: str) -> None:
    findings, _ = lint_file(_write(tmp_path, f"{check}.py", BAD[check]), "small")
    assert [f.check for f in findings] == [check], [f.message for f in findings]
    assert findings[0].path.endswith(f"{check}.py")


def test_evidence_carries_the_numbers(tmp_path: Path) -> None:
    (const,), _ = lint_file(_write(tmp_path, "c.py", BAD["constant_output"]), "small")
    assert 0.9 < const.evidence["max_abs_out"] < 1.1  # the mean hinge loss is about 1
    assert const.evidence["relative_spread"] < 0.01
    (unused,), _ = lint_file(_write(tmp_path, "u.py", BAD["unused_input"]), "small")
    assert unused.evidence["input"] == 1 and unused.evidence["max_abs_change"] == 0
    assert "identical" in unused.message
    (tiny,), _ = lint_file(_write(tmp_path, "t.py", BAD["tiny_output"]), "small")
    assert tiny.evidence["max_abs_out"] < 1e-2


def test_an_input_that_barely_matters_is_flagged(tmp_path: Path) -> None:
    src = _simple("a, b = args\n        return a + 1e-4 * b", "[torch.randn(64), torch.randn(64)]")
    (finding,), _ = lint_file(_write(tmp_path, "barely.py", src), "small")
    assert finding.check == "unused_input" and "barely changes" in finding.message
    assert 0 < finding.evidence["max_abs_change"] < 1e-2


def test_inputs_that_are_not_random_are_still_perturbed(tmp_path: Path) -> None:
    # get_inputs returns the same integer tensor for every seed: a shuffle perturbs it
    src = _simple("x, idx = args\n        return x * 3", "[torch.randn(16), torch.arange(16)]")
    (finding,), _ = lint_file(_write(tmp_path, "ints.py", src), "small")
    assert finding.check == "unused_input" and finding.evidence["input"] == 1
    used = _simple("x, idx = args\n        return x[idx]", "[torch.randn(16), torch.arange(16)]")
    assert _checks(_write(tmp_path, "used.py", used)) == []


def test_import_failures_and_missing_names_are_reported_with_the_reason(tmp_path: Path) -> None:
    broken = _write(tmp_path, "broken.py", "import opbench_no_such_module_xyz\n")
    (finding,), _ = lint_file(broken, "small")
    assert finding.check == "load_error" and "ModuleNotFoundError" in finding.message
    syntax = _write(tmp_path, "syntax.py", "def f(:\n")
    assert _checks(syntax) == ["load_error"]
    lacking = _write(tmp_path, "lacking.py", SOUND.split("def get_init_inputs")[0])
    (finding,), _ = lint_file(lacking, "small")
    assert finding.check == "load_error" and "get_init_inputs" in finding.message


def test_a_folder_is_linted_recursively_and_goes_on_after_a_broken_file(tmp_path: Path) -> None:
    # the same file name in two levels: each is its own module
    _write(tmp_path / "level1", "1_same.py", SOUND)
    _write(tmp_path / "level2", "1_same.py", BAD["unused_input"])
    _write(tmp_path / "level2", "2_broken.py", "raise ImportError('nope')\n")
    _write(tmp_path / "level2", "10_tiny.py", BAD["tiny_output"])
    _write(tmp_path / "level2", "_helper.py", "x = 1\n")
    files = problem_files(tmp_path)
    assert [f"{p.parent.name}/{p.name}" for p in files] == [
        "level1/1_same.py",
        "level2/1_same.py",
        "level2/2_broken.py",
        "level2/10_tiny.py",
    ]
    result = lint_problems(tmp_path, "small")
    got = sorted((Path(f.path).parent.name, Path(f.path).name, f.check) for f in result.findings)
    assert got == [
        ("level2", "10_tiny.py", "tiny_output"),
        ("level2", "1_same.py", "unused_input"),
        ("level2", "2_broken.py", "load_error"),
    ]


def test_size_is_passed_only_to_functions_that_take_it(tmp_path: Path) -> None:
    # "small" is 8 wide, "full" 16: an input shape that ignores size would raise here
    src = SOUND.replace(
        "return self.linear(x) * y",
        "assert x.shape[1] == SIZES['small']['n']\n        return self.linear(x) * y",
    )
    path = _write(tmp_path, "sized.py", src)
    assert _checks(path, "small") == []
    assert _checks(path, "full") == ["run_error"]
    assert _checks(_write(tmp_path, "kb.py", KERNELBENCH_STYLE), "full") == []


def test_a_problem_over_the_memory_limit_is_skipped_with_the_reason(tmp_path: Path) -> None:
    findings, skipped = lint_file(_write(tmp_path, "p.py", SOUND), "small", max_bytes=100)
    assert findings == [] and skipped is not None and "GiB limit" in skipped


def test_running_out_of_memory_skips_the_file_and_the_next_one_is_linted(tmp_path: Path) -> None:
    # KernelBench's level 1 ran the H100 out of memory in a check after the forward
    # passes; the whole lint died there and the files after it were never linted
    oom = _simple(
        "raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 8.00 GiB')",
        "[torch.randn(4)]",
    )
    _write(tmp_path, "1_oom.py", oom)
    _write(tmp_path, "2_tiny.py", BAD["tiny_output"])
    result = lint_problems(tmp_path, "small")
    (skipped,) = result.skipped.values()
    assert "out of memory" in skipped and "8.00 GiB" in skipped
    assert [f.check for f in result.findings] == ["tiny_output"]


def test_comparisons_over_slices_agree_with_whole_tensor_ones(monkeypatch) -> None:
    from opbench.programs import lint

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(1000, generator=gen)
    b = a + torch.randn(1000, generator=gen) * 1e-3
    b[777] = a[777] + 1.0  # one element off, in the last slice
    whole = (lint._max_abs([a]), lint._max_diff([a], [b]), lint._passes([b], [a], 1e-2, 1e-2))
    monkeypatch.setattr(lint, "_SLICE", 100)
    assert (
        lint._max_abs([a]),
        lint._max_diff([a], [b]),
        lint._passes([b], [a], 1e-2, 1e-2),
    ) == whole
    assert whole[2] is False and whole[1] >= 1.0


# --------------------------------------------------------------------------- the command


def _invoke(*args: str):
    from opbench.cli import app

    return CliRunner().invoke(app, ["lint-problems", *args])


def test_cli_exit_codes(tmp_path: Path) -> None:
    sound = _write(tmp_path / "ok", "sound.py", SOUND)
    result = _invoke(str(sound))
    assert result.exit_code == 0, result.output
    assert "0 finding(s)" in result.stdout
    _write(tmp_path / "bad", "unused.py", BAD["unused_input"])
    result = _invoke(str(tmp_path / "bad"))
    assert result.exit_code == 1
    assert "unused.py" in result.stdout and "unused_input" in result.stdout
    assert _invoke(str(tmp_path / "missing")).exit_code == 2
    assert _invoke(str(sound), "--size", "huge").exit_code == 2
    assert _invoke(str(sound), "--device", "tpu").exit_code == 2


def test_cli_json(tmp_path: Path) -> None:
    _write(tmp_path, "random.py", BAD["random_forward"])
    _write(tmp_path, "sound.py", SOUND)
    result = _invoke(str(tmp_path), "--json")
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["size"] == "small" and payload["device"] == "cpu"
    assert len(payload["files"]) == 2
    (finding,) = payload["findings"]
    assert finding["check"] == "random_forward" and finding["path"].endswith("random.py")
    assert finding["evidence"]["max_abs_diff"] > 0.1
    assert payload["by_check"] == {"random_forward": 1}


def test_a_journal_keeps_finished_files_and_a_rerun_resumes(tmp_path: Path) -> None:
    """A lint cut off by a time limit keeps what it finished: each file's result is
    appended as it ends, and a rerun does not lint those files again."""
    folder = tmp_path / "level1"
    folder.mkdir()
    (folder / "a_sound.py").write_text(SOUND)
    (folder / "b_sound.py").write_text(SOUND)
    journal = tmp_path / "lint.jsonl"
    first = lint_problems(folder, journal=journal)
    assert len(journal.read_text().splitlines()) == 2 and not first.findings
    # linted again, this file would now fail to import: the journal's result stands
    (folder / "b_sound.py").write_text("raise RuntimeError('must not be imported')\n")
    (folder / "c_new.py").write_text("this is not python\n")
    again = lint_problems(folder, journal=journal)
    assert [Path(f).name for f in again.files] == ["a_sound.py", "b_sound.py", "c_new.py"]
    assert [(Path(f.path).name, f.check) for f in again.findings] == [("c_new.py", "load_error")]
    assert len(journal.read_text().splitlines()) == 3


def test_a_bad_journal_line_names_the_file_and_line(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "a.py").write_text(SOUND)
    journal = tmp_path / "lint.jsonl"
    journal.write_text('{"file": "x", "size": "small", "device": "cpu"}\n')
    with pytest.raises(ValueError, match=r"lint\.jsonl:1: not a lint journal line"):
        lint_problems(folder, journal=journal)
    journal.write_text(
        json.dumps({"file": "x", "size": "full", "device": "cpu", "skipped": None, "findings": []})
        + "\n"
    )
    with pytest.raises(ValueError, match="written at size full on cpu, not small on cpu"):
        lint_problems(folder, journal=journal)
