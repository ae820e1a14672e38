"""Fit the matmul shape rule (:mod:`opbench.kernels._lib.matmul_rule`) on the tuning half
of a ``matmul_paths.py`` sweep and report it on the held-out half (issue #36).

What is fitted: each tuning-half product's :data:`TOP` best candidates with their regret
(``log(time / best time)``, capped at :data:`CAP`), the points the rule's neighbour search
runs over; and ``k``, the number of neighbours, chosen by leave-one-out over the tuning
half alone (each tuning product ranked by its nearest *other* tuning products). The
held-out half is read only after both are fixed, to report. ``--search`` scores the
:data:`SEARCH` variants of the rule (distance weights, alignment, neighbour weights,
TOP, CAP) the same way, each at its best k: the table the rule's constants were chosen
from (tuning half only; about 90 s).

What is reported, per half and op (geomean of eager / ours over the products, and the
products under 0.9x): the path served when the sweep ran (the tables), the rule, and the
best candidate per product (an oracle over the same set: what no rule can beat). A rule
choice the sweep saw fail (a TMA candidate declined) passes to the next in its ranking,
as at run time.

Usage:
    python benchmarks/tune/matmul_rule.py PATHS.jsonl --write \\
        --out benchmarks/results/matmul-paths-h200-2026-11-29 [--search]
``--write`` rewrites ``src/opbench/kernels/_lib/matmul_rule_data.py``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
from pathlib import Path
from typing import Any

from opbench.kernels._lib import matmul_rule as rule
from opbench.report.means import geomean

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "src" / "opbench" / "kernels" / "_lib" / "matmul_rule_data.py"
#: The rule being fitted: its candidates, the products it serves and its data module. The
#: shape rule's by default; ``--small`` switches to the small-product rule's
#: (:func:`matmul_rule.small_candidates` over :func:`matmul_rule.in_small_domain`, whose
#: ``tables`` candidate is the sweep's ``served:`` time: outside the shape rule's domain
#: the entry points served the tables).
FAMILY: dict[str, Any] = {"cands": rule.candidates, "domain": rule.in_domain, "data": DATA,
                          "name": "matmul shape rule"}  # fmt: skip
SMALL_FAMILY: dict[str, Any] = {
    "cands": rule.small_candidates, "domain": rule.in_small_domain,
    "data": DATA.with_name("matmul_rule_small_data.py"), "name": "matmul small-product rule",
}  # fmt: skip
#: Regrets kept per fitted product (the rest count as the cap) and the cap itself: a
#: candidate 35% slower than the best counts as much as one that failed. Leave-one-out
#: over the tuning half of the three 2026-11-29 H200 sweeps (``--search``): TOP 5 0.9466,
#: 3 0.9442, all 0.9468 (no clear gain for a data file four times the size); CAP 0.3
#: 0.9466, 0.2 0.9454, 0.5 0.9447.
TOP, CAP = 5, 0.3
KS = (1, 2, 3, 4, 5, 6, 8, 10, 12)
#: ``--search``'s variants of the rule (:func:`matmul_rule.rank`'s keywords, TOP and CAP),
#: each scored by leave-one-out over the tuning half at its best k: the rule before
#: (uniform neighbours, no alignment, log2 of M, N, K, batch alike), what each change
#: adds, and one step either way from the committed constants.
_D = rule.DISTANCE
SEARCH: dict[str, dict[str, Any]] = {
    "before: log2 (M, N, K, batch), uniform, TOP 3": dict(weights=(1, 1, 1, 1, 0), h=None,
                                                          align=False, top=3),
    "before, TOP 5": dict(weights=(1, 1, 1, 1, 0), h=None, align=False),
    "+ alignment first": dict(weights=(1, 1, 1, 1, 0), h=None),
    "+ waves x4": dict(weights=(1, 1, 1, 1, 4), h=None),
    "+ K x0.5": dict(weights=_D, h=None),
    "+ 1/(r+1) neighbour weights (committed)": {},
    "waves x2": dict(weights=(*_D[:4], 2)),
    "waves x8": dict(weights=(*_D[:4], 8)),
    "K x0.25": dict(weights=(*_D[:2], 0.25, *_D[3:])),
    "K x1": dict(weights=(*_D[:2], 1, *_D[3:])),
    "1/(r+0.5)": dict(h=0.5),
    "1/(r+2)": dict(h=2.0),
    "no alignment": dict(align=False),
    "TOP 3": dict(top=3),
    "TOP all": dict(top=99),
    "CAP 0.2": dict(cap=0.2),
    "CAP 0.5": dict(cap=0.5),
}  # fmt: skip

__all__ = ["fit_points", "main", "merge_sweeps", "read_sweep", "rule_time", "search",
           "time_key", "served_summary", "write_data"]  # fmt: skip


def read_sweep(path: str | Path) -> list[dict[str, Any]]:
    """A ``matmul_paths.py`` sweep's rows (JSON lines, gzipped where the name ends .gz)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def merge_sweeps(paths: list[str], more_products: list[str] = ()) -> list[dict[str, Any]]:
    """The rows of the first sweep, each with the candidate times of the later ones
    (``matmul_paths.py --skip-from``: candidates added after it) added where it lacks
    them; its eager and served times stay the first sweep's. ``more_products``: sweeps of
    every candidate over other products (``--max-gflop``: the products under the first
    sweep's ``--min-gflop``), their rows added whole (a product in both is refused)."""
    rows = read_sweep(paths[0])
    for path in more_products:
        seen = {(r["half"], r["op"], r["args"]) for r in rows}
        extra = read_sweep(path)
        clash = [k for r in extra if (k := (r["half"], r["op"], r["args"])) in seen]
        if clash:
            raise ValueError(f"{path}: {len(clash)} products already swept, first {clash[0]}")
        rows += extra
    by_key = {(r["half"], r["op"], r["args"]): r for r in rows}
    for path in paths[1:]:
        for r in read_sweep(path):
            base = by_key.get((r["half"], r["op"], r["args"]))
            if base is None:
                continue
            for name, t in r["times"].items():
                if name not in ("eager", "served:"):
                    base["times"].setdefault(name, t)
            for name, err in r.get("errors", {}).items():
                base.setdefault("errors", {}).setdefault(name, err)
    return rows


def time_key(kind: str, cfg: tuple[int, ...] | None = None) -> str:
    """The name a ``matmul_paths.py`` sweep keeps a time under (``served:`` for the served
    path, ``ptr:[128, 128, 64, 8, 4, 4]`` for a candidate)."""
    return f"{kind}:{json.dumps(list(cfg)) if cfg else ''}"


def _cls(row: dict[str, Any]) -> str:
    return rule.class_of(row["layout"], row["batch"])


def _dims(row: dict[str, Any]) -> tuple[int, int, int, int]:
    return (row["M"], row["N"], row["K"], row["batch"])


def regrets(row: dict[str, Any], cap: float = CAP, top: int = TOP) -> dict[str, float]:
    """Generic candidate name -> capped regret on one product (the ``top`` best)."""
    times = {}
    for kind, cfg in FAMILY["cands"](row["batch"], row["M"], row["N"], row["K"]):
        t = row["times"].get(time_key(kind, cfg), math.inf)
        times[rule.generic_name(kind, cfg)] = t
    best = min(times.values())
    if not math.isfinite(best):
        return {}
    out = {n: min(math.log(t / best), cap) for n, t in times.items() if math.isfinite(t)}
    return dict(sorted(out.items(), key=lambda kv: kv[1])[:top])


def fit_points(rows: list[dict[str, Any]], cap: float = CAP, top: int = TOP) -> tuple:
    """The rule's points from tuning-half rows only (a held-out row here is an error)."""
    if any(r["half"] != "tuning" for r in rows):
        raise ValueError("the rule is fitted on the tuning half only")
    return tuple((_cls(r), _dims(r), tuple(sorted(regrets(r, cap, top).items()))) for r in rows)


def rule_time(row: dict[str, Any], points: tuple, k: int, cap: float = CAP,
              **variant: Any) -> float:  # fmt: skip
    """The sweep's time of the rule's choice for ``row`` (the first candidate of its
    ranking that ran, as at run time), ranking by ``points`` with ``k`` neighbours
    (``variant``: :func:`matmul_rule.rank`'s keywords, the committed ones by default)."""
    for kind, cfg in rule.rank(_cls(row), *_dims(row), points=points, k=k, cap=cap,
                               cands=FAMILY["cands"], **variant):  # fmt: skip
        t = row["times"].get(time_key(kind, cfg), math.inf)
        if math.isfinite(t):
            return t
    return math.inf


def in_domain(row: dict[str, Any]) -> bool:
    """Whether the rule ranks this product at run time (``matmul_rule.in_domain``): smaller
    ones keep the bucket tables, so a product below it is a neighbour, never a score."""
    return FAMILY["domain"](row["batch"], row["M"], row["N"], row["K"])


def leave_one_out(tune: list[dict[str, Any]], k: int, cap: float = CAP, top: int = TOP,
                  **variant: Any) -> float | None:  # fmt: skip
    """Geomean eager / rule over the tuning products the rule serves (:func:`in_domain`),
    each ranked by all the others (those below the domain included: they are points)."""
    points = fit_points(tune, cap, top)
    xs = []
    for i, r in enumerate(tune):
        if not in_domain(r):
            continue
        others = points[:i] + points[i + 1 :]
        xs.append(r["times"]["eager"] / rule_time(r, others, k, cap, **variant))
    return geomean(xs)


def search(tune: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each :data:`SEARCH` variant's leave-one-out over the tuning half at each k of
    :data:`KS`, and its best k: how the committed constants were chosen (the held-out
    half is not read)."""
    out = {}
    for name, variant in SEARCH.items():
        loo = {k: leave_one_out(tune, k, **variant) for k in KS}
        best = max(KS, key=lambda k: (round(loo[k] or 0, 4), -k))
        out[name] = {"k": best, "leave_one_out": loo[best], "by_k": loo}
    return out


def summary(rows: list[dict[str, Any]], points: tuple, k: int) -> dict[str, Any]:
    """Per op and over all: products, served / rule / oracle geomeans, rule under 0.9."""
    out = {}
    for op in ("all", "mm", "addmm", "bmm", "baddbmm"):
        sel = [r for r in rows if op == "all" or r["op"].split(".")[0] == op]
        if not sel:
            continue
        ruled = [r["times"]["eager"] / rule_time(r, points, k) for r in sel]
        out[op] = {
            "products": len(sel),
            "served": geomean([r["times"]["eager"] / r["times"]["served:"] for r in sel]),
            "rule": geomean(ruled),
            "oracle": geomean([r["times"]["eager"] / min(v for n, v in r["times"].items()
                                                          if n != "eager") for r in sel]),
            "served_under_0.9": sum(r["times"]["eager"] / r["times"]["served:"] < 0.9 for r in sel),
            "rule_under_0.9": sum(x < 0.9 for x in ruled),
        }  # fmt: skip
    return out


def served_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per half and op, from a ``--served-only`` sweep run after the fit: geomean eager /
    the rule (``served``) and eager / the tables (``tables``), and the products under 0.9x
    each."""
    out: dict[str, Any] = {}
    for half in ("heldout", "tuning"):
        for op in ("all", "mm", "addmm", "bmm", "baddbmm"):
            sel = [r for r in rows if r["half"] == half and
                   (op == "all" or r["op"].split(".")[0] == op)]  # fmt: skip
            if not sel:
                continue
            rule_x = [r["times"]["eager"] / r["times"]["served:"] for r in sel]
            tab_x = [r["times"]["eager"] / r["times"]["tables:"] for r in sel]
            out.setdefault(half, {})[op] = {
                "products": len(sel), "rule": geomean(rule_x), "tables": geomean(tab_x),
                "rule_under_0.9": sum(x < 0.9 for x in rule_x),
                "tables_under_0.9": sum(x < 0.9 for x in tab_x),
            }  # fmt: skip
    return out


def _served_table(served: dict[str, Any]) -> list[str]:
    lines = ["### Measured after the fit: the rule as served beside the tables it replaced", "",
             "| half | op | products | tables | rule | tables under 0.9x | rule under 0.9x |",
             "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for half, ops in served.items():
        for op, v in ops.items():
            lines.append(f"| {half} | {op} | {v['products']} | {v['tables']:.3f} | "
                         f"{v['rule']:.3f} | {v['tables_under_0.9']} | {v['rule_under_0.9']} |")  # fmt: skip
    return [*lines, ""]


def write_data(points: tuple, k: int, fitted_on: str) -> None:
    lines = [
        f'"""The {FAMILY["name"]}\'s points, fitted on the tuning half of the traces; written',
        "by ``benchmarks/tune/matmul_rule.py --write`` (rerun it rather than editing by hand).",
        "Each point: (layout class, (M, N, K, batch), ((candidate, capped regret), ...)).",
        '"""',
        "",
        f"FITTED_ON = {json.dumps(fitted_on)}",
        f"CAP = {CAP}",
        f"K_NEAREST = {k}",
        "",
        "NEIGHBOURS: tuple = (",
    ]
    for cls, dims, regs in points:
        regs_txt = ", ".join(f"({n!r}, {v:.3f})" for n, v in regs)
        lines.append(f"    ({cls!r}, {dims!r}, ({regs_txt},)),")
    lines.append(")  # fmt: skip")
    FAMILY["data"].write_text("\n".join(lines) + "\n")


def _search_table(found: dict[str, Any]) -> list[str]:
    lines = ["### Variants of the rule, by leave-one-out over the tuning half (`--search`)", "",
             "| variant | best k | leave-one-out |", "| --- | --- | --- |"]  # fmt: skip
    lines += [f"| {name} | {v['k']} | {v['leave_one_out']:.4f} |" for name, v in found.items()]
    return [*lines, ""]


def _table(title: str, s: dict[str, Any]) -> list[str]:
    lines = [f"### {title}", "", "| op | products | served then | rule | best of the set | "
             "served under 0.9x | rule under 0.9x |", "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for op, v in s.items():
        lines.append(f"| {op} | {v['products']} | {v['served']:.3f} | {v['rule']:.3f} | "
                     f"{v['oracle']:.3f} | {v['served_under_0.9']} | {v['rule_under_0.9']} |")  # fmt: skip
    return [*lines, ""]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="matmul_paths.py sweeps (JSON lines): the "
                    "first, then any --skip-from ones that add candidates to it")  # fmt: skip
    ap.add_argument("--more-products", action="append", default=[],
                    help="a sweep of every candidate over other products (matmul_paths.py "
                    "--max-gflop), added whole; again for more")  # fmt: skip
    ap.add_argument("--write", action="store_true", help="rewrite matmul_rule_data.py")
    ap.add_argument("--out", help="OUT.json and OUT.md: the report")
    ap.add_argument("--command", default="", help="the sweep's command, for the report")
    ap.add_argument("--served", help="a --served-only sweep run after the fit, to report beside it")
    ap.add_argument("--served-command", default="", help="its command, for the report")
    ap.add_argument("--search", action="store_true", help="also score the SEARCH variants of "
                    "the rule by leave-one-out over the tuning half (about a minute)")  # fmt: skip
    ap.add_argument("--small", action="store_true", help="fit the small-product rule "
                    "(matmul_paths.py --small sweeps; writes matmul_rule_small_data.py)")  # fmt: skip
    opt = ap.parse_args()
    rows = merge_sweeps(opt.paths, opt.more_products)
    if opt.small:
        FAMILY.update(SMALL_FAMILY)
        # outside the shape rule's domain the entry points served the tables
        rows = [{**r, "times": {**r["times"], "tables:": r["times"]["served:"]}}
                for r in rows if in_domain(r)]  # fmt: skip
    tune = [r for r in rows if r["half"] == "tuning"]
    held = [r for r in rows if r["half"] == "heldout"]
    loo = {k: leave_one_out(tune, k) for k in KS}
    k = max(KS, key=lambda k: (round(loo[k] or 0, 4), -k))
    points = fit_points(tune)
    gpu = rows[0].get("gpu") if rows else None
    names = " + ".join(Path(p).name for p in [*opt.paths, *opt.more_products])
    fitted_on = f"{gpu}, torch {rows[0].get('torch')}, Triton {rows[0].get('triton')}: " \
                f"{len(tune)} tuning-half products of {names}"  # fmt: skip
    # reported over the products the rule serves; smaller ones are points only
    report = {"fitted_on": fitted_on, "k": k, "leave_one_out": loo, "top": TOP, "cap": CAP,
              "tuning": summary([r for r in tune if in_domain(r)], points, k),
              "heldout": summary([r for r in held if in_domain(r)], points, k),
              "points_below_domain": sum(not in_domain(r) for r in tune)}  # fmt: skip
    if opt.served:
        report["served"] = served_summary(read_sweep(opt.served))
    if opt.search:
        report["search"] = search(tune)
    print(json.dumps(report, indent=1))
    if opt.write:
        write_data(points, k, fitted_on)
    if opt.out:
        Path(opt.out).with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
        domain = (f"products of at least {rule.MIN_FLOP_SMALL / 1e9:g} GFLOP outside the "
                  "shape rule's domain, the only points (the bucket tables served them)"
                  if opt.small else
                  f"{report['points_below_domain']} of the points are products under the "
                  f"rule's domain ({rule.MIN_FLOP / 1e9:g} GFLOP, {rule.MIN_FLOP_ALIGNED / 1e9:g}"
                  " where M, N and K are multiples of 8: the bucket tables serve them), "
                  "neighbours only, never scored or reported")  # fmt: skip
        md = [f"# Matmul paths and the {FAMILY['name'].removeprefix('matmul ')} "
              f"({fitted_on.split(': ')[0]})", "",
              f"Sweep: `{opt.command}`; fit and report: `python benchmarks/tune/matmul_rule.py "
              f"{names}{' --small' if opt.small else ''} --write`. Split: "
              "`src/opbench/suites/trace_split.json`; "
              "the rule's points and k come from the tuning half alone (k by leave-one-out "
              f"over it: {json.dumps({str(a): round(b or 0, 3) for a, b in loo.items()})}, "
              f"k = {k}); {domain}. Geomean of eager / ours over the products; timing: "
              f"{rows[0].get('timing', 'do_bench') if rows else '-'} (`device`: the judge's "
              "device-time protocol, `matmul_timing.device_bench`; `do_bench`: "
              "`triton.testing.do_bench`, host launch included where it outlasts the L2 "
              "flush), each candidate checked against eager first. `served then`: what the "
              "entry points ran when the sweep ran.", "",
              *_table("Held-out half (never fitted on)", report["heldout"]),
              *_table("Tuning half (fitted on)", report["tuning"])]  # fmt: skip
        if opt.served:
            md += [f"Sweep after the fit: `{opt.served_command}`.", "",
                   *_served_table(report["served"])]  # fmt: skip
        if opt.search:
            md += _search_table(report["search"])
        Path(opt.out).with_suffix(".md").write_text("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
