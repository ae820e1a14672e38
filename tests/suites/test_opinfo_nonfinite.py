"""The quick profile's ``values`` cases are derived where a group's inputs hold no NaN or
Inf; the mapping records that per entry (as each call saw its inputs), so the build need
not make every input again. Both ways must give the same answers and the same suite."""

from __future__ import annotations

import pytest
import torch

from opbench.suites import opinfo, opinfo_extras
from opbench.suites.case import Case
from opbench.suites.opinfo_mapping import _build_mapping
from opbench.suites.opinfo_samples import nonfinite_in

# nansum's and addr's float32 samples hold NaN or Inf; igamma's in-place call writes NaN
# into its own input (the recorded tensors then show it); the others hold none
NAMES = ["sin", "igamma", "nn.functional.relu", "add", "nansum", "addr"]


def _case(e: dict) -> Case:
    params = {"opinfo": e["opinfo"], "variant_test_name": e["vtn"], "variant": e["variant"],
              "dtype": "float32", "kind": "sample", "index": e["index"]}  # fmt: skip
    if e.get("out") is not None:
        params["out"] = e["out"]
    return Case(op=e["op"], args=e["args"], seed=0, suite="opinfo", source="opinfo", params=params)


def test_the_mapping_records_what_building_each_input_finds():
    entries = _build_mapping("cpu", "sample", torch.float32, frozenset(NAMES))
    recorded = [e["nonfinite"] for e in entries]
    built = [opinfo_extras._nonfinite_input(_case(e), "cpu") for e in entries]
    assert recorded == built
    assert any(recorded) and not all(recorded)  # neither answer is vacuous
    assert any(e["variant"] == "inplace" and e["opinfo"] == "igamma" for e in entries)


def test_recorded_nonfinite_gives_the_suite_that_building_every_input_gives(monkeypatch, tmp_path):
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path))
    real = opinfo_extras.elementwise_extras

    def build(**how):
        monkeypatch.setattr(
            opinfo_extras,
            "elementwise_extras",
            lambda cases, device, known=None, **_: real(
                cases, device, {} if how.get("slow") else known, use_cache=how.get("cache", False)
            ),
        )
        cases = opinfo.build_opinfo_cases("cpu", "quick", [torch.float32], opinfo_names=NAMES)
        assert any(c.params.get("values") for c in cases)  # the groups do derive cases
        return sorted(c.test_id for c in cases)

    fast, slow = build(), build(slow=True)
    assert fast == slow
    # the derived cases kept on disk give the same suite, without building a group again
    assert build(cache=True) == fast
    monkeypatch.setattr(opinfo_extras, "_derived_case", lambda *a: pytest.fail("built again"))
    assert build(cache=True) == fast


def test_an_unreadable_extras_cache_is_rebuilt(monkeypatch, tmp_path):
    from opbench.suites.opinfo_extras_cache import ExtrasCache

    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path))
    cache = ExtrasCache("cpu", "float32", 0)
    cache.path.write_text("{not json")
    again = ExtrasCache("cpu", "float32", 0)
    assert again.get("any") is None
    again.put("any", [])
    again.save()
    assert ExtrasCache("cpu", "float32", 0).get("any") == []


def test_nonfinite_in_reads_floating_inputs_but_not_out():
    x = torch.tensor([1.0, float("nan")])
    assert nonfinite_in((x,), {})
    assert not nonfinite_in((torch.ones(2),), {"out": x})
    assert not nonfinite_in((torch.tensor([1, 2]),), {})


@pytest.mark.slow
def test_groups_derived_in_processes_are_the_ones_derived_here(monkeypatch, tmp_path):
    """A big machine derives the groups' cases in spawned processes: the same cases, in
    the same order, as one process derives."""
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path))
    cases = opinfo.build_opinfo_cases("cpu", "quick", [torch.float32], opinfo_names=NAMES)
    base = [c for c in cases if not (c.params.get("values") or c.params.get("layout"))]
    here = opinfo_extras.elementwise_extras(base, "cpu", use_cache=False)
    monkeypatch.setenv("OPBENCH_MAP_JOBS", "2")
    monkeypatch.setattr(opinfo_extras, "EXTRAS_PER_PROCESS", 1)
    spawned = []
    real = opinfo_extras._extras_in_processes
    monkeypatch.setattr(
        opinfo_extras, "_extras_in_processes", lambda *a: spawned.append(1) or real(*a)
    )
    there = opinfo_extras.elementwise_extras(base, "cpu", use_cache=False)
    assert spawned and [c.test_id for c in there] == [c.test_id for c in here]
    assert len(here) >= 4


def test_deriving_the_cases_tells_how_far_it_is(monkeypatch, tmp_path):
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path))
    lines: list[str] = []
    opinfo.build_opinfo_cases(
        "cpu", "quick", [torch.float32], opinfo_names=NAMES, progress=lines.append
    )
    told = [line for line in lines if line.startswith("deriving strided and special-value")]
    assert told and told[-1].endswith(" groups")
    done, total = told[-1].rsplit(": ", 1)[1].split()[0].split("/")
    assert done == total and int(total) > 0


def test_out_buffers_are_never_read_for_nan():
    """``sort.values`` takes its out buffers as ``values`` and ``indices``: uninitialised,
    so reading them made the mapping's answer differ between processes."""
    from opbench.suites.opinfo_samples import Recorder, out_names

    op = torch.ops.aten.sort.values
    assert out_names(op) == {"values", "indices"}
    x, garbage, index = torch.arange(5.0), torch.full((5,), float("nan")), torch.empty(5).long()
    rec = Recorder(see_values=True)
    with rec:
        torch.sort(x, out=(garbage, index))
    assert rec.nonfinite == {"sort.values": False}


def test_an_out_variant_never_reads_the_buffer_it_writes():
    """``diff(out=...)`` reaches ``copy_`` with the out buffer as ``self``: in the out
    variant the written argument is garbage, in an in-place call it is a real input."""
    copy_ = torch.ops.aten.copy_.default
    garbage, src = torch.full((3,), float("inf")), torch.ones(3)
    assert not nonfinite_in((garbage, src), {}, copy_, "out")
    assert nonfinite_in((garbage, src), {}, copy_, "inplace")


def test_a_group_whose_derivation_never_answers_loses_only_its_own_cases(
    monkeypatch, tmp_path, caplog
):
    """A task that gives no answer is run again a group a task: only the group that hangs
    goes without derived cases, it is named, and nothing of it is kept on disk."""
    from opbench.suites import opinfo_mapping_pool

    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path))
    cases = opinfo.build_opinfo_cases("cpu", "quick", [torch.float32], opinfo_names=NAMES)
    base = [c for c in cases if not (c.params.get("values") or c.params.get("layout"))]
    here = opinfo_extras.elementwise_extras(base, "cpu", use_cache=False)
    hangs = "sin.default"
    calls = []
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path / "extras"))  # none derived yet

    def pool(fn, tasks, jobs, progress=None, *, stall_s=None, **_):
        calls.append(len(tasks))
        return [
            None if any(d["op"] == hangs for g in groups for d, _ in g) else fn(device, groups)
            for device, groups in tasks
        ]

    monkeypatch.setattr(opinfo_mapping_pool, "run_in_processes", pool)
    monkeypatch.setattr(opinfo_mapping_pool, "map_jobs", lambda: 2)
    monkeypatch.setattr(opinfo_extras, "EXTRAS_PER_PROCESS", 1)
    with caplog.at_level("WARNING"):
        there = opinfo_extras.elementwise_extras(base, "cpu")
    assert len(calls) == 2 and calls[1] < calls[0] * 8  # a second round, one group a task
    assert [c.test_id for c in there] == [c.test_id for c in here if c.op != hangs]
    assert any(c.op == hangs for c in here) and hangs in caplog.text
    # a later build tries the lost group again, and keeps what the others derived
    monkeypatch.setattr(opinfo_mapping_pool, "run_in_processes", lambda *a, **k: None)
    again = opinfo_extras.elementwise_extras(base, "cpu")
    assert [c.test_id for c in again] == [c.test_id for c in here]
