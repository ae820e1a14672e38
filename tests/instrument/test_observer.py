"""The worker's instruments: the process-wide call observer and the integrity fingerprint.

Each test runs the real observer (PyTorch's execution-trace observer) around real calls;
the attribution must put every call a kernel makes, however it makes it, on the
candidate's side.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from opbench.instrument.integrity import Fingerprint
from opbench.instrument.observer import (
    REFERENCE_SCOPE,
    ExecutionWindow,
)

X = torch.randn(64)


def observe(fn):
    w = ExecutionWindow()
    with w:
        with w.mark():
            fn()
        torch.cos(X)  # the worker's own work after the call: not the candidate's
    return w.result


def test_calls_on_the_calling_thread_are_scoped():
    r = observe(lambda: torch.sin(X))
    assert r.scoped == {"sin": 1} and r.other_threads == {}
    assert r.marks == r.expected_marks == 1


@pytest.mark.parametrize(
    "how",
    ["thread", "pool"],
)
def test_calls_on_other_threads_are_seen(how):
    def thread():
        t = threading.Thread(target=lambda: torch.sin(X))
        t.start()
        t.join()

    def pool():
        with ThreadPoolExecutor(1) as ex:
            ex.submit(torch.sin, X).result()

    r = observe(thread if how == "thread" else pool)
    assert r.other_threads.get("sin") == 1
    assert "cos" not in r.other_threads and "cos" not in r.scoped


def test_calls_with_python_dispatch_disabled_are_seen():
    def hidden():
        with torch._C._DisableTorchDispatch():
            torch.sin(X)

    assert observe(hidden).scoped == {"sin": 1}


def test_a_fake_reference_scope_inside_the_call_does_not_hide_calls():
    def disguised():
        with torch.autograd.profiler.record_function(REFERENCE_SCOPE):
            torch.sin(X)
        with torch.autograd.profiler.record_function(f"{REFERENCE_SCOPE}#0000000000000000"):
            torch.tan(X)

    r = observe(disguised)
    assert r.scoped == {"sin": 1, "tan": 1} and r.reference == {}


def test_reference_scope_is_kept_apart_and_pause_stops_recording():
    w = ExecutionWindow()
    with w:
        with w.mark(REFERENCE_SCOPE):
            torch.exp(X)
        with w.pause():
            with w.mark():  # not recording: no scope, no mark
                torch.sin(X)
        with w.mark():
            torch.tan(X)
    assert w.result.reference == {"exp": 1}
    assert w.result.scoped == {"tan": 1}
    assert w.result.marks == w.result.expected_marks == 1


def test_fingerprint_sees_patched_functions_and_changed_settings():
    fp = Fingerprint()
    assert fp.changes() == []
    saved_equal, saved_threads = torch.equal, torch.get_num_threads()
    try:
        torch.equal = lambda *a, **k: True
        torch.set_num_threads(saved_threads + 1)
        lines = fp.changes()
        assert any("torch.equal was replaced" in x for x in lines), lines
        assert any("num_threads" in x for x in lines), lines
        fp.restore_settings()
        assert torch.get_num_threads() == saved_threads
    finally:
        torch.equal = saved_equal
        torch.set_num_threads(saved_threads)
    assert fp.changes() == []


def test_fingerprint_sees_a_replaced_dispatch_table_reader():
    """A candidate that put a kernel in front of the gate could hide it by replacing the
    reader of the dispatch table (native_calls.foreign_kernels) with one that drops its
    lines: the replacement is tampering, whatever it returns."""
    fp = Fingerprint()
    saved = torch._C._dispatch_dump_table
    try:
        torch._C._dispatch_dump_table = lambda name: saved(name).split("\n")[0]
        lines = fp.changes()
        assert "torch._C._dispatch_dump_table was replaced" in lines, lines
    finally:
        torch._C._dispatch_dump_table = saved
    assert fp.changes() == []


def test_fingerprint_sees_a_patched_judge_helper():
    import opbench.instrument.tensors as tensors

    fp = Fingerprint()
    saved = tensors.digest
    try:
        tensors.digest = lambda t: "same"
        assert any("tensors.digest" in x for x in fp.changes())
    finally:
        tensors.digest = saved


def test_inherited_fingerprint_checks_the_templates_view_and_rereads_settings():
    """A forked worker reuses the template's fingerprint (no walk of every module per
    fork): a judge helper replaced afterwards is still caught, the worker's own thread
    count is its baseline, and a new opbench module makes it take a fresh one."""
    import sys
    import types

    import opbench.instrument.tensors as tensors

    template = Fingerprint()
    saved_threads = torch.get_num_threads()
    try:
        torch.set_num_threads(saved_threads + 1)  # pinned by the worker after the fork
        fp = Fingerprint.inherited(template)
        assert fp._taken is template._taken
        assert fp.changes() == []
        saved = tensors.digest
        try:
            tensors.digest = lambda t: "same"
            assert any("tensors.digest" in x for x in fp.changes())
        finally:
            tensors.digest = saved
    finally:
        torch.set_num_threads(saved_threads)
    sys.modules["opbench._test_new_module"] = types.ModuleType("opbench._test_new_module")
    try:
        fresh = Fingerprint.inherited(template)
        assert fresh._taken is not template._taken
        assert "sys.modules[opbench._test_new_module]" in fresh._taken
    finally:
        del sys.modules["opbench._test_new_module"]
    assert Fingerprint.inherited(None).changes() == []
