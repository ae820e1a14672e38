"""``benchmarks/reproduce/triton_backend.py``'s part-2 summary without a GPU: from a run's result
store, the geomeans issue 13's targets name (matmuls of at least 1 GFLOP, convolutions)
take exactly the passed tests they should, and the markdown names every case."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

from opbench.run.store import ResultStore, TestResult

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "triton_backend", ROOT / "benchmarks/reproduce/triton_backend.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _row(i: int, op: str, status: str, speedup: float, gflop: float) -> TestResult:
    return TestResult(
        test_id=f"{op}:{i}", op=op, status=status, args=f"(case {i})", speedup=speedup,
        speedup_host=speedup / 2, ref_device_ms=0.01 * (i + 1), cand_device_ms=0.02,
        details={"roofline": {"flops": gflop * 1e9}},
    )  # fmt: skip


def test_part2_geomeans_take_the_cases_the_targets_name(tmp_path: Path) -> None:
    tb = _script()
    store = ResultStore(tmp_path / "results.sqlite")
    rows = [
        _row(0, "mm.default", "passed", 0.5, 4.0),
        _row(1, "addmm.default", "passed", 0.8, 1.0),
        _row(2, "bmm.default", "passed", 2.0, 0.5),  # under 1 GFLOP: not in the target
        _row(3, "mm.default", "failed", 9.0, 8.0),  # wrong: never counted as a speedup
        _row(4, "convolution.default", "passed", 0.1, 3.0),
        _row(5, "convolution_backward.default", "passed", 0.4, 6.0),
    ]
    for r in rows:
        store.add(r)
    s = tb.part2_summary(tmp_path)
    assert (s["tests"], s["passed"]) == (6, 5)
    assert s["matmul_1gflop"]["cases"] == 2
    assert math.isclose(s["matmul_1gflop"]["speedup_geomean"], round(math.sqrt(0.5 * 0.8), 3))
    assert s["convolution"]["cases"] == 2
    assert math.isclose(s["convolution"]["speedup_geomean"], round(math.sqrt(0.1 * 0.4), 3))
    s["env"] = {"torch": "2.11", "triton": "3.6", "gpu": "H100"}
    s["benchmark"] = {"command": "opbench run ...", "rc": 0, "wall_s": 1.0}
    md = "\n".join(tb.render_part2(s, "h100"))
    assert md.count("(case ") == 6 and "target 0.8" in md and "target 0.7" in md
    json.dumps(s)  # what the script writes


def test_copy_to_takes_only_the_files_written_since_the_call_began(tmp_path) -> None:
    """``--copy-to`` (a device call's ``$OUT``): the results this call wrote, not the
    committed ones beside them."""
    import os
    import time

    results = tmp_path / "results"
    results.mkdir()
    old = results / "triton-h100-opinfo.json"
    old.write_text("{}")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    started = time.time()
    (results / "triton-h100.json").write_text('{"new": 1}')
    (results / "triton-h100.md").write_text("# new\n")
    copied = _script().copy_written(results, tmp_path / "out", started)
    assert sorted(p.name for p in copied) == ["triton-h100.json", "triton-h100.md"]
    assert (tmp_path / "out" / "triton-h100.json").read_text() == '{"new": 1}'
    assert not (tmp_path / "out" / old.name).exists()
