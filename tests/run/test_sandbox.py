"""The worker sandbox: what a sandboxed process can and cannot reach.

Each check runs a small Python program under :func:`opbench.run.sandbox.wrap_command`
exactly as a worker is started, and asserts the escape fails. They are skipped, with a
message, where bubblewrap is missing or cannot create namespaces.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from opbench.run import sandbox

needs_bwrap = pytest.mark.skipif(
    not sandbox.bwrap_works(), reason="bubblewrap (bwrap) is not usable here"
)


def _run(code: str, *, hide=(), expose=(), env=None, mode="required") -> tuple[int, str, str]:
    base = dict(os.environ)
    base.update(env or {})
    w = sandbox.wrap_command(
        [sys.executable, "-c", textwrap.dedent(code)], mode=mode, env=base, hide=hide, expose=expose
    )
    try:
        p = subprocess.run(w.argv, env=w.env, cwd=w.cwd, capture_output=True, text=True, timeout=60)
    finally:
        w.cleanup()
    return p.returncode, p.stdout, p.stderr


def test_off_leaves_the_command_alone():
    w = sandbox.wrap_command(["python", "-V"], mode="off", env={"A": "1"})
    assert (w.argv, w.level) == (["python", "-V"], "none")


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="off, auto or required"):
        sandbox.wrap_command(["true"], mode="strict", env={})


def test_required_without_bwrap_fails_and_auto_falls_back(monkeypatch):
    monkeypatch.setattr(sandbox, "bwrap_works", lambda: False)
    with pytest.raises(sandbox.SandboxUnavailable, match="apt-get install bubblewrap"):
        sandbox.wrap_command(["true"], mode="required", env={})
    assert sandbox.wrap_command(["true"], mode="auto", env={}).level == "none"


@needs_bwrap
def test_no_network():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        code, out, err = _run(
            f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=2)
                print("CONNECTED")
            except OSError as e:
                print("blocked", e)
            """
        )
    finally:
        listener.close()
    assert code == 0, err
    assert "blocked" in out and "CONNECTED" not in out


@needs_bwrap
def test_run_dir_is_hidden_and_the_file_system_read_only(tmp_path):
    # Outside /tmp (the private /tmp would hide it anyway): beside this file.
    run_dir = Path(__file__).resolve().parent / f".sandbox-run-{os.getpid()}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.sqlite").write_text("secret results")
    # a hidden folder inside another (the run's logs/): bwrap cannot mount inside the
    # read-only tmpfs that covers the outer one, so the worker failed to start
    (run_dir / "logs").mkdir(exist_ok=True)
    repo_file = Path(__file__).resolve().parent / f"pwned-{os.getpid()}.txt"
    try:
        code, out, err = _run(
            f"""
            import os
            print("listing", os.listdir({str(run_dir)!r}))
            for target in ({str(run_dir / "x.txt")!r}, {str(repo_file)!r}, "/etc/pwned"):
                try:
                    open(target, "w").write("x")
                    print("WROTE", target)
                except OSError as e:
                    print("blocked", type(e).__name__)
            open("/tmp/scratch.txt", "w").write("fine")
            print("tmp ok")
            """,
            hide=[run_dir, run_dir / "logs"],
        )
        assert code == 0, err
        assert "listing []" in out  # the store is not there to read
        assert "WROTE" not in out and out.count("blocked") == 3
        assert "tmp ok" in out  # the private /tmp is writable
        assert not (run_dir / "x.txt").exists() and not repo_file.exists()
        assert (run_dir / "results.sqlite").read_text() == "secret results"
    finally:
        (run_dir / "results.sqlite").unlink()
        (run_dir / "logs").rmdir()
        run_dir.rmdir()


@needs_bwrap
def test_host_tmp_is_private_but_exposed_paths_are_readable(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "k.py").write_text("K = 1\n")
    (tmp_path / "other.txt").write_text("not for you")
    code, out, err = _run(
        f"""
        import os
        print("kernel", open({str(kernels / "k.py")!r}).read().strip())
        print("other", os.path.exists({str(tmp_path / "other.txt")!r}))
        try:
            open({str(kernels / "new.py")!r}, "w")
            print("WROTE")
        except OSError:
            print("kernel dir read-only")
        """,
        expose=[kernels],
    )
    assert code == 0, err
    assert "kernel K = 1" in out and "other False" in out and "kernel dir read-only" in out


@needs_bwrap
def test_judge_memory_is_out_of_reach():
    code, out, err = _run(
        f"""
        import os
        pid = {os.getpid()}
        print("visible", os.path.exists(f"/proc/{{pid}}"))
        try:
            open(f"/proc/{{pid}}/mem", "rb").read(1)
            print("READ")
        except OSError as e:
            print("blocked", type(e).__name__)
        print("ppid", os.getppid())
        """
    )
    assert code == 0, err
    assert "READ" not in out and "blocked" in out and "visible False" in out


@needs_bwrap
def test_private_tmp_is_removed_and_secrets_are_not_passed(tmp_path):
    w = sandbox.wrap_command(
        [sys.executable, "-c", "import os; open('/tmp/f', 'w'); print(sorted(os.environ))"],
        mode="auto",
        env={**os.environ, "OPENAI_API_KEY": "sk-123", "HF_TOKEN": "t", "PLAIN": "1"},
    )
    private = list(w.private_dirs)
    p = subprocess.run(w.argv, env=w.env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "OPENAI_API_KEY" not in p.stdout and "HF_TOKEN" not in p.stdout and "PLAIN" in p.stdout
    assert Path(private[0], "f").exists()
    w.cleanup()
    assert not Path(private[0]).exists()


@needs_bwrap
def test_a_harness_started_in_tmp_leaves_the_workers_tmp_private_and_writable(monkeypatch):
    """``python -m opbench.cli`` run from /tmp puts /tmp on the import path: binding it
    back covered the private /tmp read-only, and every worker died ("No usable temporary
    directory")."""
    monkeypatch.setattr(sys, "path", ["/tmp", *sys.path])
    code, out, err = _run(
        """
        import tempfile
        with tempfile.NamedTemporaryFile() as f:
            print("wrote", f.name)
        """
    )
    assert code == 0, err
    assert "wrote /tmp/" in out
