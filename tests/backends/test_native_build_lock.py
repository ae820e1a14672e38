"""The C++ gate's build waits for another process's build, as torch's ``FileBaton`` does,
but not for a lock a killed build left behind: ``FileBaton`` waits for that forever, and
CI hung at the first registered op after a run was killed mid-build (2026-11-29)."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from pathlib import Path

import pytest

from opbench.backends.native.build import wait_for_lock


def test_no_lock_returns_at_once(tmp_path: Path) -> None:
    t0 = time.monotonic()
    assert wait_for_lock(tmp_path) is False
    assert time.monotonic() - t0 < 0.5


def test_a_live_build_is_waited_for(tmp_path: Path) -> None:
    """A fresh lock stays until its builder removes it; then the wait returns and the
    lock was not touched by the waiter."""
    lock = tmp_path / "lock"
    lock.touch()
    removed = threading.Event()

    def builder() -> None:
        time.sleep(0.6)
        lock.unlink()
        removed.set()

    threading.Thread(target=builder).start()
    assert _within(5, lambda: wait_for_lock(tmp_path, stale_s=60, poll_s=0.05)) is False
    assert removed.is_set()


def _within(seconds: float, fn):  # noqa: ANN001, ANN202
    """``fn()``'s result, or a failure if it has not returned within ``seconds`` (the bug
    this guards against is a wait that never ends)."""
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert out, f"still waiting after {seconds} s"
    return out[0]


def test_a_lock_left_by_a_killed_build_is_removed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lock = tmp_path / "lock"
    lock.touch()
    old = time.time() - 3600
    os.utime(lock, (old, old))
    with caplog.at_level(logging.WARNING, logger="opbench.backends.native.build"):
        assert _within(5, lambda: wait_for_lock(tmp_path, stale_s=300, poll_s=0.05)) is True
    assert not lock.exists()
    assert "a build that was killed left it" in caplog.text


def test_a_changed_header_changes_the_build_flags(tmp_path: Path, monkeypatch) -> None:
    """torch's loader rebuilds when a source or a flag changes, not a header: the headers'
    digest is a flag, so editing gate_replay.h rebuilds the gate."""
    from opbench.backends.native import build

    for name in ("gate.cpp", *build.HEADERS):
        (tmp_path / name).write_text(f"// {name}\n")
    monkeypatch.setattr(build, "_SOURCE", tmp_path / "gate.cpp")
    before = build._headers_digest()
    assert before == build._headers_digest()
    (tmp_path / "gate_replay.h").write_text("// gate_replay.h, edited\n")
    assert build._headers_digest() != before


def test_every_header_gate_cpp_includes_is_hashed() -> None:
    from opbench.backends.native import build

    # gate.cpp's own includes and theirs, followed through the headers
    found: set[str] = set()
    todo = [build._SOURCE]
    while todo:
        for name in re.findall(r'#include "(gate_\w+\.h)"', todo.pop().read_text()):
            if name not in found:
                found.add(name)
                todo.append(build._SOURCE.with_name(name))
    assert sorted(found) == sorted(build.HEADERS)
