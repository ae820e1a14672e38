"""The harness derives every speedup and flag from a worker's measurements
(judge/timing_rules.py), for operator and program runs alike: what a worker message
claims under those names changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from opbench.judge.perf_verdict import apply_timing
from opbench.judge.timing_rules import derive
from opbench.programs.judge import timing_fields
from opbench.run.store import TestResult
from opbench.suites.case import Case

CASE = Case(op="relu.default", args="((T([64, 64], f32),), {})")


def _measurements(**over: Any) -> dict[str, Any]:
    t = {
        "ref_device_ms": 0.020,
        "cand_device_ms": 0.010,
        "ref_host_ms": 0.025,
        "cand_host_ms": 0.010,
        "ref_device_rel_se": 0.001,
        "cand_device_rel_se": 0.001,
        "rel_err_target": 0.004,
        "launch_floor_ms": 0.00125,
        "spread": 0.01,
        "sleep_us": 50.0,
        "inputs_changed": False,
        "side_stream": None,
        "synced": None,
    }
    t.update(over)
    return t


def _result() -> TestResult:
    return TestResult(test_id="t", op=CASE.op, args=CASE.args, status="passed")


CLAIMS = {
    "flags": ["overhead_dominated", "noisy"],
    "speedup_device": 100.0,
    "speedup_host": 100.0,
    "event_speedup_device": 100.0,
}


def test_claims_in_an_operator_timing_change_nothing() -> None:
    honest, claiming = _result(), _result()
    apply_timing(honest, CASE, _measurements(), "cpu")
    apply_timing(claiming, CASE, {**_measurements(), **CLAIMS}, "cpu")
    assert claiming.speedup == honest.speedup == pytest.approx(2.0)
    assert claiming.speedup_host == honest.speedup_host == pytest.approx(2.5)
    assert claiming.flags == honest.flags
    assert "overhead_dominated" not in claiming.flags and "noisy" not in claiming.flags


def test_claims_in_a_program_timing_change_nothing() -> None:
    honest, claiming = _result(), _result()
    timing_fields(honest, {"timing": _measurements()})
    timing_fields(claiming, {"timing": {**_measurements(), **CLAIMS}})
    assert claiming.speedup == honest.speedup == pytest.approx(2.0)
    assert claiming.flags == honest.flags == []


def test_operator_and_program_runs_derive_alike() -> None:
    t = _measurements(cand_device_ms=0.0014, cand_host_ms=0.5, ref_device_rel_se=0.02)
    op, prog = _result(), _result()
    apply_timing(op, CASE, t, "cpu")
    timing_fields(prog, {"timing": t})
    assert (op.speedup, op.speedup_host) == (prog.speedup, prog.speedup_host)
    assert op.flags == prog.flags == ["host_bound", "noisy", "overhead_dominated"]


def test_side_stream_suspect_takes_the_synced_ratio() -> None:
    side = {"ref_event_us": 20.0, "delta_us": 15.0, "ref_excess_us": 5, "cand_excess_us": 20}
    d = derive(_measurements(side_stream=side, synced={"ref_ms": 0.02, "cand_ms": 0.025}))
    assert "side_stream_suspect" in d["flags"]
    assert d["event_speedup_device"] == pytest.approx(2.0)
    assert d["speedup_device"] == pytest.approx(0.8)
    # a suspect without the synced times is not timed at all
    d = derive(_measurements(side_stream=side))
    assert d["speedup_device"] is None and "untimed" in d["flags"]
    # within the tolerance: no flag, the event ratio stands
    d = derive(_measurements(side_stream={**side, "delta_us": 2.0}))
    assert "side_stream_suspect" not in d["flags"] and d["speedup_device"] == pytest.approx(2.0)


def test_changed_inputs_are_flagged_from_the_raw_observation() -> None:
    assert "mutates_input" in derive(_measurements(inputs_changed=True))["flags"]
    assert "mutates_input" not in derive(_measurements())["flags"]
