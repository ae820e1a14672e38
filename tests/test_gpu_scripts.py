"""The GPU run scripts (``benchmarks/gpu/*.sh``): valid bash, and every ``opbench run``
(``python3 -m opbench.cli run``) flag they pass is one the CLI has, so a renamed flag fails here and not on a lent GPU
machine's clock."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO / "benchmarks" / "gpu").glob("*.sh"))


@pytest.mark.parametrize("script", [*SCRIPTS, REPO / "benchmarks/common/gpu_env.sh"],
                         ids=lambda p: p.name)  # fmt: skip
def test_scripts_parse(script: Path) -> None:
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_opbench_run_flags_exist() -> None:
    help_text = subprocess.run(
        [sys.executable, "-m", "opbench.cli", "run", "--help"], capture_output=True,
        text=True, check=True, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    ).stdout  # fmt: skip
    used = set()
    for script in SCRIPTS:
        text = script.read_text()
        for cmd in re.findall(r"opbench(?:\.cli)? run\b[^)]*\)", text, flags=re.S):
            used |= set(re.findall(r"(--[a-z][a-z-]+)", cmd))
        used |= set(re.findall(r"CMD\+=\((--[a-z][a-z-]+)", text))
    assert {"--trace-split", "--resume", "--limit-per-op", "--workers"} <= used, used
    missing = sorted(f for f in used if f not in help_text)
    assert not missing, missing


def test_heldout_run_default_ops_are_operators() -> None:
    """The script's default ``--ops`` (``triton_backend.py``'s COVERED and PART2): every
    name one PyTorch knows, as ``opbench run`` checks them (a placeholder left in once
    stopped the run at its first line on the GPU machine)."""
    sys.path.insert(0, str(REPO / "benchmarks" / "reproduce"))
    import triton_backend

    from opbench.spec.ops import select_ops

    names = (triton_backend.COVERED + "," + triton_backend.PART2).split(",")
    selected, _ = select_ops(names, [])  # raises UnknownOpError for an unknown name
    assert not selected and len(names) > 70


def _script_copy(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """``heldout_run.sh`` in a copy of the repository's layout with ``gpu_env.sh`` stubbed
    (its ``pack_run`` kept): the script, the folder it runs in, and an environment for a
    CPU run of the aten backend."""
    traces = REPO.parent / "shared" / "traces"
    if not traces.is_dir():
        pytest.skip(f"traces not found at {traces}")
    root = tmp_path / "repo"
    (root / "benchmarks" / "gpu").mkdir(parents=True)
    (root / "benchmarks" / "common").mkdir()
    (root / ".gpu_data").mkdir()
    (root / ".gpu_data" / "traces").symlink_to(traces)
    (root / "benchmarks" / "reproduce").symlink_to(REPO / "benchmarks" / "reproduce")
    (root / "src").symlink_to(REPO / "src")
    real_env = (REPO / "benchmarks" / "common" / "gpu_env.sh").read_text()
    pack = real_env[real_env.index("pack_run() {") :]
    (root / "benchmarks" / "common" / "gpu_env.sh").write_text(
        f'export PATH="{Path(sys.executable).parent}:$PATH"\n{pack}'
    )
    script = root / "benchmarks" / "gpu" / "heldout_run.sh"
    script.write_text((REPO / "benchmarks" / "gpu" / "heldout_run.sh").read_text())
    out = tmp_path / "out"
    out.mkdir()
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "OUT": str(out),
           "DEVICE": "cpu", "BACKEND": "aten", "OPS": "relu", "GPU": "cpu", "HOME": str(tmp_path),
           "RUN": str(tmp_path / "m1" / "heldout-run")}  # fmt: skip
    return script, root, env


def test_heldout_run_all_rows_and_workers(tmp_path: Path) -> None:
    """``LIMIT_PER_OP=all`` drops ``--limit-per-op`` (every held-out row of every op),
    ``WORKERS`` passes ``--workers`` and ``SHARD`` ``--shard``; the default keeps the two
    most used rows an op."""
    script, root, env = _script_copy(tmp_path)

    def command(**extra: str) -> str:
        done = subprocess.run(["bash", str(script)], cwd=root, env={**env, "LIMIT": "1", **extra},
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return next(line for line in done.stdout.splitlines() if "opbench.cli run" in line)

    every = command(LIMIT_PER_OP="all", WORKERS="4")
    assert "--limit-per-op" not in every and "--workers 4" in every
    assert "--limit-per-op 2" in command() and "--workers" not in command()
    assert "--shard" not in every
    part = command(LIMIT_PER_OP="all", SHARD="2/3")
    assert "--shard 2/3" in part and "--trace-split heldout" in part
    assert "--trace-split tuning" in command(HALF="tuning")
    # cut at its limit, the part still reports what it holds, named for its part
    out = Path(env["OUT"])
    assert (out / "triton-heldout-cpu-aten-all-rows-shard-2-of-3-partial.json").is_file()
    # NAME goes first in the files' names (a subset of the ops says so)
    command(NAME="sub", RUN=str(tmp_path / "m3" / "heldout-run"))
    assert (out / "triton-heldout-cpu-sub-aten-partial.json").is_file()


@pytest.mark.slow
def test_heldout_run_resumes_packs_and_reports(tmp_path: Path) -> None:
    """The whole script on the CPU (``DEVICE=cpu``, ``BACKEND=aten``: the Triton kernels
    would run in the interpreter, past the judge's time limit; one op), in a copy of the repository's
    layout with ``gpu_env.sh`` stubbed (its ``pack_run`` kept): a first call cut by its
    limit packs the run and says how to go on; ``RESTORE`` of the pack on a "new machine"
    (another /tmp folder) resumes it, and the finished run is reported into ``$OUT``."""
    script, root, env = _script_copy(tmp_path)
    out = Path(env["OUT"])

    def call(**extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(script)], cwd=root, env={**env, **extra},
                              capture_output=True, text=True, timeout=600)  # fmt: skip

    first = call(LIMIT="2")  # cut at once: nothing judged, or a little
    assert first.returncode == 0, first.stderr[-2000:]
    assert "RESTORE=" in first.stdout and (out / "heldout-run.tgz").is_file()
    # what the cut run holds, reported as partial; no whole report
    assert [p.name for p in out.glob("triton-heldout-*.json")] == [
        "triton-heldout-cpu-aten-partial.json"]  # fmt: skip
    moved = tmp_path / "carried.tgz"
    (out / "heldout-run.tgz").rename(moved)
    done = call(LIMIT="500", RESTORE=str(moved), RUN=str(tmp_path / "m2" / "heldout-run"))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    report = json.loads((out / "triton-heldout-cpu-aten.json").read_text())
    assert report["tests"] > 0 and report["passed"] == report["tests"], report
    assert len(report["rows"]) == report["tests"] and not report["partial"]


def _settings_in_scripts() -> list[tuple[str, str, list[str]]]:
    """``(script, variant name or "--set", [MODULE.NAME=VALUE, ...])`` of every
    ``--variant`` and ``--set`` the GPU scripts pass."""
    found = []
    for script in SCRIPTS:
        for kind, value in re.findall(r"--(variant|set) ([^\s\\]+)", script.read_text()):
            if "$" in value:  # a shell variable: set by the caller
                continue
            name, settings = value.partition("=")[::2] if kind == "variant" else ("--set", value)
            found.append((script.name, name, [s for s in settings.split(",") if s]))
    return found


def test_every_scripted_setting_names_a_constant_and_moves_it() -> None:
    """Each ``MODULE.NAME=VALUE`` a GPU script passes names a constant of the backend's
    modules and parses (``kernel_overrides.apply_overrides`` would end the run on the GPU
    machine's clock otherwise), and each variant changes at least one setting from its
    default: a variant equal to the defaults times nothing (two steps of
    ``conv_pending.sh`` did, once the settings they tried were switched on)."""
    import ast
    import importlib

    found = _settings_in_scripts()
    assert len(found) > 10, found
    for script, name, settings in found:
        moved = False
        for item in settings:
            target, _, value = item.partition("=")
            module, _, attr = target.rpartition(".")
            mod = importlib.import_module(f"opbench.kernels._lib.{module}")
            assert hasattr(mod, attr), f"{script}: {name}: {module} has no {attr}"
            moved |= ast.literal_eval(value) != getattr(mod, attr)
        assert moved or name == "--set", f"{script}: variant {name} is the defaults"
