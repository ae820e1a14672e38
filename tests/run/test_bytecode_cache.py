"""The harness's compiled-bytecode cache (:mod:`opbench.run.bytecode_cache`): used only
where processes would compile a package from source every time, handed to the processes
the harness starts, never written by a worker, and read-only inside the sandbox."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from opbench.run import bytecode_cache, sandbox

REPO = Path(__file__).resolve().parents[2]
PKG = "obc_probe_pkg"


def _package(root: Path, name: str = PKG) -> Path:
    (root / name).mkdir(parents=True)
    init = root / name / "__init__.py"
    init.write_text("VALUE = 42\n")
    return init


def _pycs(folder: Path, name: str) -> list[Path]:
    return [p for p in folder.rglob("*.pyc") if name in p.parts]


def test_only_a_package_without_bytecode_where_python_writes_none_needs_the_cache(
    tmp_path, monkeypatch
):
    init = _package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert bytecode_cache.needs_bytecode_cache(PKG)
    assert not bytecode_cache.needs_bytecode_cache("no_such_package_anywhere")
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "chosen"))
    assert not bytecode_cache.needs_bytecode_cache(PKG)  # someone chose: leave it
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert not bytecode_cache.needs_bytecode_cache(PKG)  # Python writes it beside the source
    py_compile.compile(str(init), cfile=str(Path(_cache_from_source(init))))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert not bytecode_cache.needs_bytecode_cache(PKG)  # read even when writing none


def _cache_from_source(path: Path) -> str:
    import importlib.util

    return importlib.util.cache_from_source(str(path))


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{env.pop('PATH_EXTRA')}"}
    full.pop("PYTHONPYCACHEPREFIX", None)
    full.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


USE = """
    import os, subprocess, sys
    from opbench.run.bytecode_cache import use_bytecode_cache
    folder = use_bytecode_cache({pkg!r})
    import {pkg}
    print("folder", folder)
    child = "import sys; print('child', sys.pycache_prefix, sys.dont_write_bytecode)"
    subprocess.run([sys.executable, "-c", child], check=True)
"""


def test_the_harness_and_the_processes_it_starts_share_one_cache(tmp_path):
    _package(tmp_path / "lib")
    cache = tmp_path / "cache"
    env = {"PATH_EXTRA": str(tmp_path / "lib"), "PYTHONDONTWRITEBYTECODE": "1",
           "OPBENCH_CACHE_DIR": str(cache)}  # fmt: skip
    p = _python(USE.format(pkg=PKG), env)
    assert p.returncode == 0, p.stderr
    folder = cache / "bytecode"
    assert f"folder {folder}" in p.stdout
    assert f"child {folder} False" in p.stdout  # a child reads and writes the same cache
    assert _pycs(folder, PKG), "the package's bytecode was not written to the cache"
    assert not (tmp_path / "lib" / PKG / "__pycache__").exists()  # nothing beside the source


def test_off_leaves_python_alone(tmp_path):
    _package(tmp_path / "lib")
    env = {"PATH_EXTRA": str(tmp_path / "lib"), "PYTHONDONTWRITEBYTECODE": "1",
           "OPBENCH_CACHE_DIR": str(tmp_path / "cache"), "OPBENCH_BYTECODE_CACHE": "off"}  # fmt: skip
    p = _python(USE.format(pkg=PKG), env)
    assert p.returncode == 0, p.stderr
    assert "folder None" in p.stdout and "child None True" in p.stdout
    assert not (tmp_path / "cache" / "bytecode").exists()


def test_always_uses_the_cache_where_it_is_not_needed_and_a_bad_setting_is_an_error(
    tmp_path, monkeypatch
):
    _package(tmp_path / "lib")
    env = {"PATH_EXTRA": str(tmp_path / "lib"), "OPBENCH_CACHE_DIR": str(tmp_path / "cache"),
           "OPBENCH_BYTECODE_CACHE": "always"}  # fmt: skip
    p = _python(USE.format(pkg=PKG), env)  # Python could write beside the source here
    assert p.returncode == 0, p.stderr
    assert _pycs(tmp_path / "cache" / "bytecode", PKG)
    monkeypatch.setenv("OPBENCH_BYTECODE_CACHE", "sometimes")
    with pytest.raises(ValueError, match="OPBENCH_BYTECODE_CACHE"):
        bytecode_cache.use_bytecode_cache(PKG)


def test_a_worker_reads_the_cache_and_writes_nothing_to_it(tmp_path):
    """What ``worker.main`` does first (``stop_writing``): a module a candidate brings is
    compiled from source and leaves nothing in the cache the harness reads."""
    _package(tmp_path / "lib", "candidate_mod")
    folder = tmp_path / "cache" / "bytecode"
    folder.mkdir(parents=True)
    env = {"PATH_EXTRA": str(tmp_path / "lib"), "PYTHONPYCACHEPREFIX": str(folder)}
    p = _python(
        """
        from opbench.run.bytecode_cache import stop_writing
        stop_writing()
        import candidate_mod
        print("value", candidate_mod.VALUE)
        """,
        env,
    )
    assert p.returncode == 0, p.stderr
    assert "value 42" in p.stdout
    assert not _pycs(folder, "candidate_mod")


def test_the_worker_stops_writing_before_it_reads_anything_from_the_harness():
    """``worker.main`` calls ``stop_writing`` before the protocol's first message, so
    before any candidate code is imported."""
    import inspect

    from opbench.run import worker

    src = inspect.getsource(worker.main)
    assert "stop_writing()" in src
    assert src.index("stop_writing()") < src.index("read_trusted(") < src.index("import torch")


@pytest.mark.skipif(not sandbox.bwrap_works(), reason="bubblewrap (bwrap) is not usable here")
def test_a_sandboxed_worker_cannot_write_the_harness_cache():
    # outside /tmp (a sandboxed worker's /tmp is its own): beside this file
    folder = Path(__file__).resolve().parent / f".bytecode-{os.getpid()}"
    target = folder / "opbench" / "run" / "__pycache__"
    target.mkdir(parents=True)
    (target / "outcome_verdict.cpython-3.pyc").write_bytes(b"harness's")
    try:
        code = f"""
            import os
            print("sees", sorted(os.listdir({str(target)!r})))
            try:
                open({str(target / "outcome_verdict.cpython-3.pyc")!r}, "wb").write(b"forged")
                print("WROTE")
            except OSError as e:
                print("blocked", type(e).__name__)
        """
        w = sandbox.wrap_command([sys.executable, "-c", textwrap.dedent(code)],
                                 mode="required", env=dict(os.environ))  # fmt: skip
        try:
            p = subprocess.run(w.argv, env=w.env, cwd=w.cwd, capture_output=True, text=True,
                               timeout=60)  # fmt: skip
        finally:
            w.cleanup()
        assert p.returncode == 0, p.stderr
        assert "sees ['outcome_verdict.cpython-3.pyc']" in p.stdout  # read: yes
        assert "blocked" in p.stdout and "WROTE" not in p.stdout
        assert (target / "outcome_verdict.cpython-3.pyc").read_bytes() == b"harness's"
    finally:
        for p in sorted(folder.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        folder.rmdir()


def test_the_command_refuses_a_setting_it_does_not_know_in_one_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OPBENCH_BYTECODE_CACHE": "maybe"}
    p = subprocess.run([sys.executable, "-m", "opbench.cli", "run", "--suite", "smoke"],
                       env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 2
    assert "OPBENCH_BYTECODE_CACHE must be 'auto', 'off' or 'always'" in p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
