"""``benchmarks/tune/tune_matmul.py`` without a GPU: traced calls grouped into the kernel's
buckets, the operands handed to the kernel exactly as the entry points hand them (checked
against eager under the interpreter), the choice per bucket from a journal, and the
configuration table it writes, which the kernel then reads."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import DEVICE, assert_matches  # noqa: E402

from opbench.kernels._lib import matmul  # noqa: E402
from opbench.spec.args import parse_args  # noqa: E402
from opbench.suites.inputs import make_inputs  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TRACE = """Operator: aten.mm.default
cnt: 5, ((T([40, 24], f16), T([24, 33], f16, stride=(1, 24))), {})
cnt: 1, ((T([40, 24], f16), T([24, 33], f16)), {})
Operator: aten.addmm.default
cnt: 3, ((T([33], f16), T([40, 24], f16), T([24, 33], f16, stride=(1, 24))), {})
Operator: aten.bmm.default
cnt: 2, ((T([3, 20, 16], f32), T([3, 16, 2000], f32)), {})
Operator: aten.relu.default
cnt: 9, ((T([4], f16),), {})
"""


def _script():
    spec = importlib.util.spec_from_file_location(
        "tune_matmul", ROOT / "benchmarks/tune/tune_matmul.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_traced_calls_land_in_the_kernels_buckets(tmp_path):
    tm = _script()
    (tmp_path / "m.txt").write_text(TRACE)
    buckets = tm.shapes_from_traces(str(tmp_path))
    assert sorted(buckets) == sorted([matmul.bucket(2, 40, 33, 24), matmul.bucket(4, 20, 2000, 16)])
    rows = buckets[matmul.bucket(2, 40, 33, 24)]
    assert [r["weight"] for r in rows] == [5, 3, 1]  # most used first
    assert {r["op"] for r in rows} == {"mm.default", "addmm.default"}


@pytest.mark.parametrize(
    # the bmm row ([3, 20, 16] @ [3, 16, 2000]): 2.7-4.8 s on 2 cores (2026-11-28, --durations)
    "line",
    [1, 4, pytest.param(6, marks=pytest.mark.slow)],
)
def test_operands_are_what_the_entry_points_pass(line: int) -> None:
    """The tuner times matmul_into on these operands: they must compute the traced op."""
    tm = _script()
    op = {1: "mm.default", 4: "addmm.default", 6: "bmm.default"}[line]
    text = TRACE.splitlines()[line].split(", ", 1)[1]
    args, kwargs = make_inputs(op, parse_args(text), DEVICE, 0)
    out, a, b, bias, alpha, beta = tm.operands(op, args, kwargs)
    got = matmul.matmul_into(out, a, b, bias, alpha, beta, (16, 32, 16, 4, 4, 1))
    got = got if op.startswith("bmm") else got[0]
    assert_matches(got, getattr(torch.ops.aten, op.split(".")[0]), *args, **kwargs)


CONV_TRACE = """Operator: aten.convolution.default
cnt: 4, ((T([2, 24, 3, 5], f16), T([20, 24, 1, 1], f16), T([20], f16), [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {})
cnt: 7, ((T([2, 24, 3, 5], f16), T([20, 24, 3, 3], f16), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1), {})
Operator: aten.convolution_backward.default
cnt: 2, ((T([2, 20, 3, 5], f16), T([2, 24, 3, 5], f16), T([20, 24, 1, 1], f16), [0], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False]), {})
cnt: 1, ((T([2, 20, 3, 5], f16), T([2, 24, 3, 5], f16), T([20, 24, 1, 1], f16), [0], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [False, True, False]), {})
"""  # fmt: skip


def test_pointwise_convolutions_are_tuned_as_the_products_they_run(tmp_path) -> None:
    """The backend runs 1x1 convolutions on the matmul kernel: a forward is ``W @ x[n]``
    (M = C_out, N = positions, K = C_in), a backward's input gradient ``W^T @ dy[n]``;
    the 3x3 one and the backward without an input gradient are not products."""
    tm = _script()
    (tmp_path / "c.txt").write_text(CONV_TRACE)
    buckets = tm.shapes_from_traces(str(tmp_path))
    rows = {r["op"]: r for rs in buckets.values() for r in rs}
    assert sorted(rows) == ["convolution.default", "convolution_backward.default"]
    fwd, bwd = rows["convolution.default"], rows["convolution_backward.default"]
    assert (fwd["batch"], fwd["M"], fwd["N"], fwd["K"]) == (2, 20, 15, 24)
    assert (bwd["batch"], bwd["M"], bwd["N"], bwd["K"]) == (2, 24, 15, 20)
    assert fwd["weight"] == 4 and bwd["weight"] == 2
    for op, row in rows.items():
        args, kwargs = make_inputs(op, parse_args(row["args"]), DEVICE, 0)
        out, a, b, bias, alpha, beta = tm.operands(op, args, kwargs)
        got = matmul.matmul_into(out, a, b, bias, alpha, beta, (16, 32, 16, 4, 4, 1))
        want = tm.reference(op, args, kwargs)
        assert torch.allclose(got.float(), want.reshape(got.shape).float(), rtol=1e-2,
                              atol=1e-2)  # fmt: skip
        if op == "convolution_backward.default":  # the input gradient eager computes
            gi = torch.ops.aten.convolution_backward(*args)[0]
            assert torch.allclose(got.float(), gi.reshape(got.shape).float(), rtol=1e-2,
                                  atol=1e-2)  # fmt: skip


def test_each_bucket_times_its_most_used_and_its_heaviest_shape() -> None:
    tm = _script()
    row = lambda w, m: {"weight": w, "M": m, "N": 1024, "K": 1024, "batch": 1}  # noqa: E731
    used, heavy, other = row(30, 300), row(20, 2048), row(25, 257)
    assert tm.picked([used, other, heavy], 1) == [used, heavy]
    assert tm.picked([used, other, heavy], 3) == [used, other, heavy]
    assert tm.picked([heavy, used], 1) == [heavy]
    assert tm.traced_time(heavy) > tm.traced_time(used) > tm.traced_time(other)


def test_fits_keeps_tiles_no_larger_than_the_problem() -> None:
    tm = _script()
    assert tm.fits((16, 128, 64, 8, 4, 4), 8, 1000, 64)
    assert not tm.fits((128, 128, 64, 8, 4, 4), 8, 1000, 64)
    assert all(tm.fits(c, 4096, 4096, 4096) for c in tm.CANDIDATES_16 + tm.CANDIDATES_32)
    assert all(min(c[:3]) >= 16 for c in tm.CANDIDATES_16 + tm.CANDIDATES_32)


def test_report_chooses_the_weighted_fastest_and_writes_the_table(tmp_path, monkeypatch):
    tm = _script()
    journal = tmp_path / "tune.jsonl"
    big, small = "[128, 128, 64, 8, 8, 3]", "[64, 64, 64, 8, 4, 4]"
    times = {  # shape weight, then ms per config: `big` wins on the heavy shape
        "mm|a": (9, {"eager": 1.0, "default": 1.2, big: 0.8, small: 1.1}),
        "mm|b": (1, {"eager": 1.0, "default": 1.0, big: 1.3, small: 0.9, "[1]": math.inf}),
    }
    rows = [
        {"bucket": "2:3:3:2", "op": "mm.default", "args_key": k, "weight": w, "M": 1, "N": 1,
         "K": 1, "config": c, "ms": ms}
        for k, (w, ts) in times.items() for c, ms in ts.items()
    ]  # fmt: skip
    journal.write_text("".join(json.dumps(r) + "\n" for r in rows))
    configs = tmp_path / "matmul_configs.py"
    monkeypatch.setattr(tm, "CONFIGS_PY", configs)
    monkeypatch.setattr("sys.argv", ["tune_matmul.py", "--report"])
    out = tmp_path / "res"
    args = tm.argparse.Namespace(
        journal=str(journal), write=True, out=str(out), heldout_per_bucket=0
    )
    tm.report(args)
    data = json.loads(out.with_suffix(".json").read_text())
    (row,) = data["buckets"]
    assert row["best"] == big  # 0.8^0.9 * 1.3^0.1 beats 1.1^0.9 * 0.9^0.1 and the default
    assert abs(row["best_ms"] - math.exp(0.9 * math.log(0.8) + 0.1 * math.log(1.3))) < 1e-12
    spec = importlib.util.spec_from_file_location("cfgs", configs)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.TUNED == {"2:3:3:2": (128, 128, 64, 8, 8, 3)}
    assert "tune_matmul.py --report" in configs.read_text()


def test_the_kernel_reads_tuned_configs_outside_the_interpreter(monkeypatch) -> None:
    monkeypatch.setattr(matmul, "_INTERPRETING", False)
    monkeypatch.setattr(
        matmul, "CONFIGS", {matmul.bucket(2, 4096, 4096, 4096): (64, 256, 32, 4, 8, 3)}
    )
    assert matmul.config_for(2, 4096, 4096, 4096) == (64, 256, 32, 4, 8, 3)
    assert matmul.config_for(2, 4096, 4096, 512) == matmul._default(2, 4096, 4096)


def test_exact_shape_configs_come_before_the_buckets(monkeypatch) -> None:
    monkeypatch.setattr(matmul, "_INTERPRETING", False)
    bucketed = (64, 64, 64, 8, 4, 4)
    exact = (128, 128, 64, 8, 8, 3, 2)
    monkeypatch.setattr(matmul, "CONFIGS", {matmul.bucket(2, 2048, 1024, 1024): bucketed})
    monkeypatch.setattr(matmul, "SHAPE_CONFIGS", {(2, 1, 2048, 1024, 1024): exact})
    assert matmul.config_for(2, 2048, 1024, 1024) == exact
    assert matmul.config_for(2, 2048, 1024, 1024, batch=2) == bucketed  # another product
    assert matmul.config_for(2, 2048, 768, 768) == bucketed  # same bucket, not the shape


def test_write_configs_replaces_one_table_and_keeps_the_other(tmp_path) -> None:
    tm = _script()
    path = tmp_path / "matmul_configs.py"
    tm.write_configs(path, tuned={"2:3:3:3": (64, 64, 64, 8, 4, 4)}, tuned_on="bucket run")
    tm.write_configs(path, shapes={(2, 1, 768, 768, 8192): (128, 128, 64, 8, 8, 3, 4)},
                     shapes_on="shape run")  # fmt: skip
    got = tm.read_configs(path)
    assert got == {"TUNED": {"2:3:3:3": (64, 64, 64, 8, 4, 4)}, "TUNED_ON": "bucket run",
                   "SHAPES": {(2, 1, 768, 768, 8192): (128, 128, 64, 8, 8, 3, 4)},
                   "SHAPES_ON": "shape run"}  # fmt: skip
    tm.write_configs(path, tuned={}, tuned_on="again")
    assert tm.read_configs(path)["SHAPES"] == got["SHAPES"]
    # the committed table is what the writer writes (so --write rewrites it in kind)
    from opbench.kernels._lib import matmul_configs

    committed = tm.read_configs(tm.CONFIGS_PY)
    assert committed["TUNED"] == matmul_configs.TUNED
    assert committed["SHAPES"] == matmul_configs.SHAPES
    assert all(len(v) in (6, 7) for v in committed["SHAPES"].values())


def test_shape_candidates_split_only_products_that_leave_sms_idle() -> None:
    tm = _script()
    split = lambda *s: [c[6] for c in tm.shape_candidates(*s) if len(c) > 6]  # noqa: E731
    assert split(1, 768, 768, 8192) == [2, 3, 4, 6]  # 36 tiles of 128x128
    assert split(1, 8192, 768, 768) == []  # 384 tiles: more than two waves
    assert split(1, 768, 768, 256) == []  # 4 K blocks: too short to share
    assert all(tm.fits(c, 512, 1536, 1536) for c in tm.shape_candidates(1, 512, 1536, 1536))
    assert tm._compile_key({"op": "mm", "args": "((T([768, 8192], f16, stride=(1, 768)),))"},
                           (1, 2, 3, 4, 5, 6, 2)) == (
        "mm", "((T([#, #], f16, stride=(1, #)),))", (1, 2, 3, 4, 5, 6), True)  # fmt: skip


def test_the_shape_tuner_reports_the_held_out_half_with_what_it_serves(monkeypatch) -> None:
    """``--shapes`` picks on the tuning half only and times the held-out half's products
    with the configuration the kernel serves them after the tuning: the pick where that
    very product was tuned, the kernel's own choice elsewhere; never one picked on them."""
    tm = _script()
    calls = []

    def fake_products(traces, min_gflop, limit, split="tuning"):
        calls.append(split)
        return [
            {"op": "mm.default", "args": "x", "itemsize": 2, "batch": 1, "M": 64, "N": 64,
             "K": 64, "gflop": 1.0},
            {"op": "mm.default", "args": "y", "itemsize": 2, "batch": 1, "M": 96, "N": 32,
             "K": 64, "gflop": 1.0},
        ]  # fmt: skip

    timed = []

    def fake_measure(row, cands):
        timed.append((row["args"], cands))
        return {"eager": 1.0, json.dumps(list(cands[0])): 2.0}

    hm = sys.modules["matmul_heldout"]  # where the held-out reports live, beside the tuner
    monkeypatch.setattr(hm, "judged_products", fake_products)
    monkeypatch.setattr(hm, "measure_shape", fake_measure)
    monkeypatch.setattr(hm, "warm", lambda tasks, jobs: None)
    picked_here = (128, 64, 32, 4, 4, 1)
    chosen = {(2, 1, 64, 64, 64): picked_here}
    args = tm.argparse.Namespace(traces="t", min_gflop=1.0, limit=8, jobs=1)
    out = tm.heldout_products(args, chosen)
    assert calls == ["heldout"]
    assert timed[0] == ("x", [picked_here])  # tuned on this very product: the pick
    default = tuple(matmul.config_for(2, 96, 32, 64, 1))
    assert timed[1] == ("y", [default])  # never tuned: what the kernel picks itself
    assert out["summary"]["products"] == 2 and out["summary"]["tuned_products_among_them"] == 1
    assert out["summary"]["served_vs_eager"] == pytest.approx(0.5)
    assert any("held-out" in line for line in tm.heldout_lines(out))


def test_the_bucket_report_times_held_out_shapes_with_the_pick_and_the_default(
    monkeypatch,
) -> None:
    """The bucket tuning's report times the held-out half's shapes of each bucket it
    covers with eager, the untuned default and the bucket's pick (the default where the
    default won), reading only the held-out half for them."""
    tm = _script()
    asked = []

    def fake_shapes(traces, heldout=False):
        asked.append(heldout)
        row = lambda m: {"op": "mm.default", "args": f"a{m}", "weight": 1, "M": m, "N": 64,  # noqa: E731
                         "K": 64, "batch": 1}  # fmt: skip
        return {"2:tuned": [row(64), row(80), row(96)], "2:plain": [row(32)]}

    def fake_measure(row, cands):
        return {"eager": 1.0, **{json.dumps(list(c)): 0.5 + 0.25 * i for i, c in enumerate(cands)}}

    hm = sys.modules["matmul_heldout"]
    monkeypatch.setattr(hm, "shapes_from_traces", fake_shapes)
    monkeypatch.setattr(hm, "measure_shape", fake_measure)
    pick = (128, 64, 32, 4, 4, 1)
    args = tm.argparse.Namespace(traces="t", heldout_per_bucket=2)
    out = tm.heldout_buckets(args, ["2:tuned", "2:plain"], {"2:tuned": pick})
    assert asked == [True]
    rows = out["shapes"]
    assert [r["args"] for r in rows] == ["a64", "a80", "a32"]  # two a bucket at most
    assert [tuple(r["pick"]) for r in rows[:2]] == [pick, pick]
    assert tuple(rows[2]["pick"]) == tuple(matmul._default(2, 32, 64))
    assert rows[0]["default_ms"] == 0.5 and rows[0]["pick_ms"] == 0.75
    assert out["summary"]["shapes"] == 3
    assert any("held-out" in line for line in tm.heldout_bucket_lines(out))


def test_the_held_out_half_lands_beside_the_tuning_half_in_the_report(tmp_path) -> None:
    tm = _script()
    out = tmp_path / "report"
    out.with_suffix(".json").write_text(json.dumps({"summary": {"buckets": 1}}))
    out.with_suffix(".md").write_text("# table\n")
    heldout = {"summary": {"shapes": 0}, "shapes": []}
    tm.add_heldout(str(out), heldout, tm.heldout_bucket_lines(heldout))
    data = json.loads(out.with_suffix(".json").read_text())
    assert data == {"summary": {"buckets": 1}, "heldout": heldout}
    md = out.with_suffix(".md").read_text()
    assert md.startswith("# table\n") and "## The held-out half" in md
