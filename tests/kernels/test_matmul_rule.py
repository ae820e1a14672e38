"""The matmul shape rule (:mod:`opbench.kernels._lib.matmul_rule`) and its fitter
(``benchmarks/tune/matmul_rule.py``): every candidate it can choose computes what eager
does (interpreter here; ``OPBENCH_KERNEL_DEVICE=cuda`` compiled on a GPU), the ranking
follows the neighbours' regrets, the entry points run the ranking's first candidate
that launches, and the fitter reads the tuning half only."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")

from kernel_checks import DEVICE, assert_matches  # noqa: E402

from opbench.kernels._lib import matmul, matmul_rule, matmul_rule_data, matmul_rule_small_data  # noqa: E402
from opbench.kernels._lib.matmul_tma import tma_matmul_into  # noqa: E402
from opbench.kernels._lib.matmul_tma_batched import tma_bmm_into  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "tune"))


def _operands(batch: int, M: int, N: int, K: int, a_t: bool, b_t: bool, dtype: torch.dtype):
    g = torch.Generator().manual_seed(M * 7 + N * 3 + K)
    a = torch.randn((batch, K, M) if a_t else (batch, M, K), generator=g).to(DEVICE, dtype)
    b = torch.randn((batch, N, K) if b_t else (batch, K, N), generator=g).to(DEVICE, dtype)
    a, b = (a.transpose(1, 2) if a_t else a), (b.transpose(1, 2) if b_t else b)
    bias = torch.randn(N, generator=g).to(DEVICE, dtype)
    return a, b, bias


#: A product with split candidates (one 128x128 tile over 16 K blocks) and ragged edges.
SHAPE = (72, 80, 1000)
CANDIDATES = matmul_rule.candidates(1, *SHAPE) + [
    c for c in matmul_rule.candidates(2, *SHAPE) if c[0] == "tmab"
]


@pytest.mark.parametrize("kind,cfg", CANDIDATES, ids=[matmul_rule.generic_name(*c) +
                         str(c[1][6:]) for c in CANDIDATES])  # fmt: skip
@pytest.mark.parametrize("a_t,b_t", [(False, False), (True, False), (False, True)])
def test_every_candidate_matches_eager(kind: str, cfg: tuple, a_t: bool, b_t: bool) -> None:
    batch = 2 if kind == "tmab" else 1
    a, b, bias = _operands(batch, *SHAPE, a_t, b_t, torch.float16)
    out = torch.full((batch, SHAPE[0], SHAPE[1]), math.nan, dtype=torch.float16, device=DEVICE)
    x = bias.expand(out.shape)
    if kind == "tmab":
        assert tma_bmm_into(out, a, b, x, 0.5, 2.0, cfg)
    elif kind == "tma":
        assert tma_matmul_into(out, a, b, x, 0.5, 2.0, cfg)
    else:
        matmul.matmul_into(out, a, b, x, 0.5, 2.0, cfg)
    assert_matches(out, lambda *t: torch.baddbmm(*t, alpha=0.5, beta=2.0), x, a, b)


def test_split_candidates_only_where_tiles_leave_sms_idle() -> None:
    assert any(len(c) > 6 for _, c in matmul_rule.candidates(1, 72, 80, 1000))
    big = matmul_rule.candidates(1, 4096, 4096, 4096)  # 1024 tiles of 128x128
    assert all(len(c) == 6 for _, c in big)
    assert not any(k == "tma" for k, _ in matmul_rule.candidates(4, 512, 512, 512))
    assert matmul_rule.split_for(128, 128, 64 * 8, 128, 128, 64, 1) == 2  # 8 blocks, 4 each


def test_one_wave_splits_never_spill_into_a_second_wave() -> None:
    # 36 tiles of 128 x 128: split_for's 4 programs each make 144 items (two waves on
    # 132 SMs), one_wave_split's 3 make 108
    assert matmul_rule.split_for(768, 768, 12672, 128, 128, 64, 1) == 4
    assert matmul_rule.one_wave_split(768, 768, 12672, 128, 128, 64, 1) == 3
    names = [matmul_rule.generic_name(*c) for c in matmul_rule.candidates(1, 768, 768, 12672)]
    assert {"ptr:128x128x64/4w4s/S1", "tma:128x128x64/8w4s/S1"} <= set(names)
    assert len(names) == len(set(names))
    # where both rules count alike, no second candidate
    assert not any(n.endswith("/S1") for n in (matmul_rule.generic_name(*c) for c in
                                               matmul_rule.candidates(1, 72, 80, 1000)))  # fmt: skip


@pytest.mark.parametrize("kind", ["ptr", "tma"])
def test_a_tagged_split_configuration_runs_its_count(kind: str) -> None:
    """The 8th entry of a one-wave split candidate names its rule; the kernels read the
    first seven (3 programs along K here) and match eager."""
    a, b, bias = _operands(1, *SHAPE, False, True, torch.float16)
    out = torch.full((1, SHAPE[0], SHAPE[1]), math.nan, dtype=torch.float16, device=DEVICE)
    cfg = (64, 64, 64, 8, 4, 4, 3, matmul_rule.WAVE)
    if kind == "tma":
        assert tma_matmul_into(out, a, b, None, 1.0, 1.0, cfg)
    else:
        matmul.matmul_into(out, a, b, None, 1.0, 1.0, cfg)
    assert_matches(out, torch.bmm, a, b)


def _point(cls: str, dims: tuple, best: str) -> tuple:
    return (cls, dims, ((best, 0.0),))


def test_the_ranking_follows_the_nearest_points_of_the_class() -> None:
    tma = "tma:128x128x64/4w4s"
    ptr = "ptr:64x64x64/4w4s"
    points = (
        _point("rr1", (1024, 1024, 1024, 1), tma),
        _point("rr1", (1024, 1024, 2048, 1), tma),
        _point("rr1", (64, 8192, 8192, 1), ptr),
        _point("cr1", (1024, 1024, 1024, 1), ptr),
        _point("cr1", (2048, 1024, 1024, 1), ptr),
    )
    first = matmul_rule.rank("rr1", 1500, 1024, 1024, 1, points, k=2, cap=0.3)[0]
    assert matmul_rule.generic_name(*first) == tma
    # the same shape in another class follows that class's points
    first = matmul_rule.rank("cr1", 1500, 1024, 1024, 1, points, k=2, cap=0.3)[0]
    assert matmul_rule.generic_name(*first) == ptr
    # a class with fewer points than k ranks by every class's nearest
    near = matmul_rule.nearest("x1", (1024, 1024, 1024, 1), 3, points)
    assert len(near) == 3 and {p[0] for p in near} == {"rr1", "cr1"}
    # every candidate of the product is ranked, pointer-kernel ones among them
    ranking = matmul_rule.rank("rr1", 1500, 1024, 1024, 1, points, k=2, cap=0.3)
    assert sorted(map(str, ranking)) == sorted(
        map(str, matmul_rule.candidates(1, 1500, 1024, 1024))
    )


def test_neighbours_as_aligned_as_the_product_come_first() -> None:
    tma, ptr = "tma:128x128x64/4w4s", "ptr:128x128x64/4w4s"
    points = (
        _point("rc1", (2048, 1024, 1024, 1), tma),  # aligned, the nearest in sizes
        _point("rc1", (2048, 1032, 1024, 1), tma),
        _point("rc1", (4096, 486, 1024, 1), ptr),  # N = 486: not a multiple of 8
    )
    first = matmul_rule.rank("rc1", 2048, 1022, 1024, 1, points, k=1, cap=0.3)[0]
    assert matmul_rule.generic_name(*first) == ptr
    first = matmul_rule.rank("rc1", 2048, 1022, 1024, 1, points, k=1, cap=0.3, align=False)[0]
    assert matmul_rule.generic_name(*first) == tma
    # an aligned product follows the aligned points, though the other is no farther
    first = matmul_rule.rank("rc1", 4096, 488, 1024, 1, points, k=1, cap=0.3)[0]
    assert matmul_rule.generic_name(*first) == tma
    # fewer of its kind than k: the others fill in
    assert len(matmul_rule.nearest("rc1", (2048, 1022, 1024, 1), 2, points)) == 2


def test_a_product_whose_tiles_make_as_many_waves_is_nearer() -> None:
    # N = 1080 is a little nearer 1024 in log2 than 968, but 9 columns of 128-wide tiles
    # where 1024 and 968 make 8
    near = matmul_rule.nearest("rr1", (2048, 1024, 1024, 1), 1,
                               (_point("rr1", (2048, 1080, 1024, 1), "a"),
                                _point("rr1", (2048, 968, 1024, 1), "b")))  # fmt: skip
    assert abs(math.log2(1080 / 1024)) < abs(math.log2(968 / 1024))
    assert near[0][1] == (2048, 968, 1024, 1)
    # without the waves' weight, log2 N alone decides
    flat = (*matmul_rule.DISTANCE[:4], 0.0)
    near = matmul_rule.nearest("rr1", (2048, 1024, 1024, 1), 1,
                               (_point("rr1", (2048, 1080, 1024, 1), "a"),
                                _point("rr1", (2048, 968, 1024, 1), "b")), flat)  # fmt: skip
    assert near[0][1] == (2048, 1080, 1024, 1)


def test_the_nearest_neighbour_outweighs_farther_ones() -> None:
    tma, ptr = "tma:128x128x64/4w4s", "ptr:128x128x64/4w4s"
    points = (
        _point("rr1", (1024, 1024, 1024, 1), tma),
        _point("rr1", (4096, 1024, 1024, 1), ptr),
        _point("rr1", (8192, 1024, 1024, 1), ptr),
    )
    # weights 1, 1/2, 1/3: one nearest against two farther
    first = matmul_rule.rank("rr1", 1024, 1024, 1024, 1, points, k=3, cap=0.3)[0]
    assert matmul_rule.generic_name(*first) == tma
    # alike (h None), the two outvote it
    first = matmul_rule.rank("rr1", 1024, 1024, 1024, 1, points, k=3, cap=0.3, h=None)[0]
    assert matmul_rule.generic_name(*first) == ptr


def test_the_fitted_points_name_real_candidates_and_classes() -> None:
    assert matmul_rule.fitted() == (matmul_rule_data.NEIGHBOURS, matmul_rule_data.K_NEAREST,
                                    matmul_rule_data.CAP)  # fmt: skip
    # every name the candidates take: split counts by both rules need a few tile counts
    names = {matmul_rule.generic_name(k, c) for b in (1, 2) for m in (64, 512, 768)
             for n in (64, 512, 768) for k, c in matmul_rule.candidates(b, m, n, 65536)}  # fmt: skip
    assert len(matmul_rule_data.NEIGHBOURS) >= matmul_rule_data.K_NEAREST
    for cls, dims, regrets in matmul_rule_data.NEIGHBOURS:
        assert cls in {"rr1", "rc1", "cr1", "x1", "rrN", "rcN", "crN", "xN"}
        # products under the domain are neighbours too, down to the sweeps' 0.1 GFLOP
        assert len(dims) == 4 and 2 * math.prod(dims) >= matmul_rule.MIN_FLOP / 10
        assert regrets and all(n in names and 0 <= r <= matmul_rule_data.CAP for n, r in regrets)


def _record(monkeypatch, declines: bool) -> list:
    calls: list = []
    monkeypatch.setattr(matmul, "_INTERPRETING", False)
    monkeypatch.setattr(matmul, "matmul_into",
                        lambda *a: calls.append(("ptr", a[6] if len(a) > 6 else None)))  # fmt: skip
    import opbench.kernels._lib.matmul_tma as tma

    def fake_tma(*a):
        calls.append(("tma", a[6]))
        return not declines

    monkeypatch.setattr(tma, "tma_matmul_into", fake_tma)
    return calls


@pytest.mark.parametrize("declines", [False, True])
def test_entry_points_run_the_first_candidate_that_launches(monkeypatch, declines) -> None:
    a = torch.empty(1, 2048, 1024, dtype=torch.float16)
    b = torch.empty(1, 1024, 1024, dtype=torch.float16)
    out = torch.empty(1, 2048, 1024, dtype=torch.float16)
    ranking = matmul_rule.ranked(matmul_rule.layout_class(a, b), 2048, 1024, 1024, 1)
    calls = _record(monkeypatch, declines)
    matmul.matmul_ruled_into(out, a, b)
    first_ptr = next(i for i, (k, _) in enumerate(ranking) if k == "ptr")
    # the first candidate; where TMA declines, every TMA one before the first pointer one
    assert calls == list(ranking[: first_ptr + 1] if declines else ranking[:1])


@pytest.mark.parametrize("small_rule", [True, False])
def test_small_products_take_the_small_rule_and_tiny_ones_the_tables(monkeypatch, small_rule) -> None:
    monkeypatch.setattr(matmul, "SMALL_RULE", small_rule)
    calls = _record(monkeypatch, declines=False)
    small = (torch.empty(1024, 65, 65, dtype=torch.float16),) * 2  # 0.56 GFLOP, unaligned
    matmul.matmul_ruled_into(torch.empty(1024, 65, 65, dtype=torch.float16), *small)
    tiny = (torch.empty(1, 128, 128, dtype=torch.float16),) * 2  # 4 MFLOP
    matmul.matmul_ruled_into(torch.empty(1, 128, 128, dtype=torch.float16), *tiny)
    big32 = (torch.empty(1, 1024, 1024),) * 2
    matmul.matmul_ruled_into(torch.empty(1, 1024, 1024), *big32)
    (kind, cfg), *_ = matmul_rule.ranked_small(matmul_rule.layout_class(*small), 65, 65, 65, 1024)
    assert kind in ("ptr", "tables")
    first = ("ptr", (cfg or None) if small_rule else None)
    assert calls == [first, ("ptr", None), ("ptr", None)]  # None: the tables' own choice


#: An unaligned batched product (every tile's edges ragged, K under one 64-deep block).
SMALL_SHAPE = (2, 37, 40, 33)
SMALL_CASES = [(c, SMALL_SHAPE) for _, c in matmul_rule.small_candidates(*SMALL_SHAPE)[1:]]


@pytest.mark.parametrize("cfg,shape", SMALL_CASES,
                         ids=[matmul_rule.generic_name("ptr", c) for c, _ in SMALL_CASES])  # fmt: skip
@pytest.mark.parametrize("a_t,b_t", [(False, False), (False, True)])
def test_every_small_candidate_matches_eager(cfg: tuple, shape: tuple, a_t: bool, b_t: bool) -> None:
    batch, M, N, K = shape
    a, b, bias = _operands(batch, M, N, K, a_t, b_t, torch.float16)
    out = torch.full((batch, M, N), math.nan, dtype=torch.float16, device=DEVICE)
    x = bias.expand(out.shape)
    matmul.matmul_into(out, a, b, x, 0.5, 2.0, cfg)
    assert_matches(out, lambda *t: torch.baddbmm(*t, alpha=0.5, beta=2.0), x, a, b)


@pytest.mark.parametrize("data", [matmul_rule_data, matmul_rule_small_data],
                         ids=["shape_rule", "small_rule"])  # fmt: skip
def test_the_committed_fit_is_the_one_its_header_names(data) -> None:
    """The data module holds as many points as ``FITTED_ON`` counts, fitted on a GPU from
    sweeps committed in ``benchmarks/results``: a fitter test that wrote its toy fit over
    the committed one (3 points, 2026-12-02) fails here, not on the GPU."""
    head, _, sweeps = data.FITTED_ON.partition(": ")
    count = int(sweeps.split(" tuning-half products of ")[0])
    assert head.startswith("NVIDIA ") and len(data.NEIGHBOURS) == count
    for name in sweeps.split(" of ", 1)[1].split(" + "):
        assert (REPO / "benchmarks" / "results" / name).is_file(), name


def test_the_small_rule_serves_what_the_shape_rule_does_not() -> None:
    """Between :data:`MIN_FLOP_SMALL` and the shape rule's domain, never both."""
    assert matmul_rule.in_small_domain(1024, 65, 64, 65)  # 0.55 GFLOP, unaligned
    assert not matmul_rule.in_small_domain(128, 128, 128, 64)  # the shape rule's (aligned)
    assert not matmul_rule.in_small_domain(1, 128, 128, 128)  # 4 MFLOP: the tables
    assert not matmul_rule.in_small_domain(1, 4096, 4096, 4096)


def test_the_small_rule_points_name_its_candidates() -> None:
    assert matmul_rule.fitted_small() == (matmul_rule_small_data.NEIGHBOURS,
                                          matmul_rule_small_data.K_NEAREST,
                                          matmul_rule_small_data.CAP)  # fmt: skip
    names = {matmul_rule.generic_name(k, c) for k, c in matmul_rule.small_candidates(1, 1, 1, 1)}
    assert "tables" in names and len(names) == len(matmul_rule.SMALL_TILES) + 1
    assert matmul_rule.small_candidates(1, 64, 1000, 2048) == matmul_rule.small_candidates(1, 1, 1, 1)
    assert len(matmul_rule_small_data.NEIGHBOURS) >= matmul_rule_small_data.K_NEAREST
    for cls, (M, N, K, batch), regrets in matmul_rule_small_data.NEIGHBOURS:
        assert cls in {"rr1", "rc1", "cr1", "x1", "rrN", "rcN", "crN", "xN"}
        assert matmul_rule.in_small_domain(batch, M, N, K)
        assert regrets and all(n in names and 0 <= r <= matmul_rule_small_data.CAP
                               for n, r in regrets)  # fmt: skip


def _sweep_row(half: str, M: int, times: dict[str, float]) -> dict:
    return {"half": half, "op": "mm.default", "args": f"({M})", "layout": "rr", "batch": 1, "M": M, "N": 1024,
            "K": 1024, "times": {"eager": 1.0, "served:": 2.0, **times}, "errors": {}}  # fmt: skip


def test_the_fitter_reads_the_tuning_half_only_and_reports_held_out(tmp_path, monkeypatch) -> None:
    import matmul_rule as fitter

    fast = f"tma:{json.dumps([128, 128, 64, 8, 4, 4])}"
    slow = f"ptr:{json.dumps([128, 256, 64, 8, 8, 3])}"
    rows = [_sweep_row("tuning", m, {fast: 0.5, slow: 1.0}) for m in (1024, 2048, 4096)]
    held = _sweep_row("heldout", 3000, {fast: 0.8, slow: 0.4})
    with pytest.raises(ValueError, match="tuning half only"):
        fitter.fit_points([*rows, held])
    points = fitter.fit_points(rows)
    assert all(dict(p[2])["tma:128x128x64/4w4s"] == 0.0 for p in points)
    # the held-out row gets what the tuning points rank first, though it loses there
    assert fitter.rule_time(held, points, 2) == 0.8
    # a declined (inf) choice passes to the next in the ranking, as at run time
    declined = _sweep_row("heldout", 3000, {fast: math.inf, slow: 0.4})
    assert fitter.rule_time(declined, points, 2) == 0.4
    paths = tmp_path / "paths.jsonl"
    paths.write_text("".join(json.dumps(r) + "\n" for r in [*rows, held]))
    data = tmp_path / "data.py"
    monkeypatch.setitem(fitter.FAMILY, "data", data)
    monkeypatch.setattr(sys, "argv", ["matmul_rule.py", str(paths), "--write", "--out",
                                      str(tmp_path / "rep")])  # fmt: skip
    assert fitter.main() == 0
    written: dict = {}
    exec(data.read_text(), written)  # noqa: S102 - the module the fitter wrote
    assert [p[1] for p in written["NEIGHBOURS"]] == [(m, 1024, 1024, 1) for m in (1024, 2048, 4096)]
    report = json.loads((tmp_path / "rep.json").read_text())
    assert report["heldout"]["all"]["rule"] == pytest.approx(1.0 / 0.8)
    assert report["heldout"]["all"]["oracle"] == pytest.approx(1.0 / 0.4)
    assert "Held-out half" in (tmp_path / "rep.md").read_text()


def test_a_later_sweep_adds_its_candidates_to_the_first(tmp_path) -> None:
    import matmul_rule as fitter

    old = f"ptr:{json.dumps([128, 128, 64, 8, 8, 3])}"
    new = f"tma:{json.dumps([256, 128, 64, 8, 8, 3])}"
    first = _sweep_row("tuning", 1024, {old: 0.5})
    later = {**_sweep_row("tuning", 1024, {new: 0.25, old: 9.0}), "errors": {new: ""}}
    later["times"]["eager"] = 7.0
    stranger = _sweep_row("tuning", 4096, {new: 0.1})  # not in the first sweep: left out
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    paths[0].write_text(json.dumps(first) + "\n")
    paths[1].write_text(json.dumps(later) + "\n" + json.dumps(stranger) + "\n")
    (row,) = fitter.merge_sweeps([str(p) for p in paths])
    assert row["times"] == {"eager": 1.0, "served:": 2.0, old: 0.5, new: 0.25}


def test_a_sweep_of_other_products_is_added_whole_and_never_twice(tmp_path) -> None:
    import matmul_rule as fitter

    cand = f"ptr:{json.dumps([128, 128, 64, 8, 8, 3])}"
    first, small = _sweep_row("tuning", 1024, {cand: 0.5}), _sweep_row("tuning", 64, {cand: 0.1})
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"]
    paths[0].write_text(json.dumps(first) + "\n")
    paths[1].write_text(json.dumps(small) + "\n")
    paths[2].write_text(json.dumps(first) + "\n")
    rows = fitter.merge_sweeps([str(paths[0])], [str(paths[1])])
    assert [r["M"] for r in rows] == [1024, 64] and rows[1]["times"][cand] == 0.1
    with pytest.raises(ValueError, match="already swept"):
        fitter.merge_sweeps([str(paths[0])], [str(paths[2])])


def test_the_domain_reaches_aligned_products_further_down() -> None:
    """Products of 0.1-1 GFLOP are ranked by the rule where M, N and K are multiples of
    8 and left to the bucket tables where one is not (the tables led there on the tuning
    half); under 0.1 GFLOP neither is ranked, over 1 GFLOP both are."""
    assert matmul_rule.in_domain(128, 128, 128, 64)  # 0.27 GFLOP, the held-out bmm
    assert not matmul_rule.in_domain(2048, 33, 64, 33)  # 0.28 GFLOP, K = 33
    assert not matmul_rule.in_domain(8, 128, 128, 64)  # 17 MFLOP
    assert matmul_rule.in_domain(1, 1023, 1024, 1024)  # 2.1 GFLOP, M = 1023


def test_the_small_fitter_takes_the_tables_from_the_served_time(tmp_path, monkeypatch) -> None:
    """``--small``: only products outside the shape rule's domain are points or scores,
    and the ``tables`` candidate is the sweep's ``served:`` time there."""
    import matmul_rule as fitter

    tile = f"ptr:{json.dumps(list(matmul_rule.SMALL_TILES[0]))}"

    def row(half: str, M: int, served: float, tile_t: float) -> dict:
        return {"half": half, "op": "bmm.default", "args": f"({M})", "layout": "rr",
                "batch": 1024, "M": M, "N": 40, "K": 40,
                "times": {"eager": 1.0, "served:": served, tile: tile_t}, "errors": {}}  # fmt: skip

    rows = [row("tuning", m, 2.0, 1.0) for m in (197, 201, 205)]  # unaligned: small rule's
    rows.append(row("tuning", 200, 0.1, 9.0))  # aligned 0.65 GFLOP: the shape rule's, dropped
    rows.append(row("heldout", 199, 0.5, 0.8))
    paths = tmp_path / "small.jsonl"
    paths.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = tmp_path / "small_data.py"
    monkeypatch.setitem(fitter.SMALL_FAMILY, "data", data)
    monkeypatch.setattr(fitter, "FAMILY", dict(fitter.FAMILY))
    monkeypatch.setattr(sys, "argv", ["matmul_rule.py", str(paths), "--small", "--write",
                                      "--out", str(tmp_path / "rep")])  # fmt: skip
    assert fitter.main() == 0
    written: dict = {}
    exec(data.read_text(), written)  # noqa: S102 - the module the fitter wrote
    assert [p[1][0] for p in written["NEIGHBOURS"]] == [197, 201, 205]
    assert all(dict(p[2])[matmul_rule.generic_name("ptr", matmul_rule.SMALL_TILES[0])] == 0.0
               and dict(p[2])["tables"] == 0.3 for p in written["NEIGHBOURS"])  # fmt: skip
    report = json.loads((tmp_path / "rep.json").read_text())
    # the held-out product takes the tile its neighbours rank first, though the tables win
    assert report["heldout"]["all"]["rule"] == pytest.approx(1.0 / 0.8)
    assert report["heldout"]["all"]["served"] == pytest.approx(1.0 / 0.5)
    assert "small-product rule" in (tmp_path / "rep.md").read_text()
