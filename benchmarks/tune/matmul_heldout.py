"""The held-out half beside the tuning half in the matmul tuners' reports (issue #36):
the judged products and the bucket shapes of the half no pick was timed on, timed with
what the kernel serves them after the tuning, so overfitting shows in the report of the
run that causes it. Nothing here is picked."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from matmul_rows import judged_products, shapes_from_traces
from matmul_timing import measure_shape, warm

from opbench.report.means import geomean

__all__ = [
    "add_heldout",
    "heldout_bucket_lines",
    "heldout_buckets",
    "heldout_lines",
    "heldout_products",
    "served_config",
]


def add_heldout(out: str | None, heldout: dict[str, Any], lines: list[str]) -> None:
    """Print the held-out summary and put the held-out half beside the tuning half in the
    report's ``OUT.json`` (key ``heldout``) and ``OUT.md`` (a section after the table)."""
    print(json.dumps({"heldout": heldout["summary"]}), flush=True)
    if out:
        path = Path(out)
        data = json.loads(path.with_suffix(".json").read_text())
        data["heldout"] = heldout
        path.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
        with path.with_suffix(".md").open("a") as f:
            f.write("\n".join(lines) + "\n")


def served_config(
    itemsize: int,
    batch: int,
    M: int,
    N: int,
    K: int,
    chosen: dict[tuple[int, ...], tuple[int, ...]],
) -> tuple[int, ...]:
    """The configuration the kernel serves a product with once ``chosen`` is written:
    the pick for that very product where it was tuned, else what it picks now (the
    bucket tables and the heuristics: what a shape it was never tuned on gets)."""
    from opbench.kernels._lib import matmul

    key = (itemsize, batch, M, N, K)
    return tuple(chosen.get(key) or matmul.config_for(itemsize, M, N, K, batch))  # fmt: skip


def heldout_products(
    args: argparse.Namespace, chosen: dict[tuple[int, ...], tuple[int, ...]]
) -> dict[str, Any]:
    """Eager and the served configuration (:func:`served_config`) timed on the judged
    products of the held-out half: the tuning's effect on rows it never saw, so that
    overfitting shows in the report of the run that causes it (issue #36). Nothing here
    is picked."""
    rows = judged_products(args.traces, args.min_gflop, args.limit, split="heldout")
    tasks = []
    for r in rows:
        r["served"] = list(served_config(r["itemsize"], r["batch"], r["M"], r["N"], r["K"],
                                         chosen))  # fmt: skip
        r["tuned_here"] = (r["itemsize"], r["batch"], r["M"], r["N"], r["K"]) in chosen
        tasks.append((r["op"], r["args"], tuple(r["served"])))
    warm(tasks, args.jobs)
    for r in rows:
        times = measure_shape(r, [tuple(r["served"])])
        r["eager_ms"], r["served_ms"] = times["eager"], times[json.dumps(r["served"])]
    ok = [r for r in rows if math.isfinite(r["served_ms"])]
    return {
        "summary": {
            "products": len(rows),
            "served_vs_eager": geomean([r["eager_ms"] / r["served_ms"] for r in ok]),
            "tuned_products_among_them": sum(r["tuned_here"] for r in rows),
            "failed_or_wrong": len(rows) - len(ok),
        },
        "products": rows,
    }


def heldout_lines(heldout: dict[str, Any]) -> list[str]:
    """The held-out section of the ``--shapes`` report."""
    lines = [
        "", "## The held-out half (never timed for a pick)", "",
        f"Summary: `{json.dumps(heldout['summary'])}`; `served`: the configuration the kernel "
        "serves the product with after this tuning (the pick where this very product was "
        "tuned, else its current choice).", "",
        "| op | batch x M x N x K | GFLOP | eager ms | served | ms | vs eager | tuned here |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]  # fmt: skip
    for r in heldout["products"]:
        lines.append(
            f"| {r['op']} | {r['batch']}x{r['M']}x{r['N']}x{r['K']} | {r['gflop']:.2f} | "
            f"{r['eager_ms']:.4f} | {r['served']} | {r['served_ms']:.4f} | "
            f"{r['eager_ms'] / r['served_ms']:.3f} | {'yes' if r['tuned_here'] else 'no'} |"
        )  # fmt: skip
    return lines


def heldout_buckets(
    args: argparse.Namespace, buckets: list[str], tuned: dict[str, tuple[int, ...]]
) -> dict[str, Any]:
    """The held-out half's most used shapes (``--heldout-per-bucket`` a bucket) of the
    buckets the report covers, timed with eager, the untuned default and the bucket's
    pick: what the tuning does on shapes it never saw (issue #36). Nothing is picked."""
    from opbench.kernels._lib import matmul

    held = shapes_from_traces(args.traces, heldout=True)
    rows = []
    for key in buckets:
        for r in held.get(key, [])[: args.heldout_per_bucket]:
            itemsize = int(key.split(":")[0])
            default = tuple(matmul._default(itemsize, r["M"], r["N"]))
            pick = tuned.get(key, default)
            times = measure_shape(r, [default] if pick == default else [default, pick])
            rows.append({**r, "bucket": key, "pick": list(pick), "eager_ms": times["eager"],
                         "default_ms": times[json.dumps(list(default))],
                         "pick_ms": times[json.dumps(list(pick))]})  # fmt: skip
    ok = [r for r in rows if math.isfinite(r["pick_ms"]) and math.isfinite(r["default_ms"])]
    return {
        "summary": {
            "shapes": len(rows),
            "pick_vs_eager": geomean([r["eager_ms"] / r["pick_ms"] for r in ok]),
            "default_vs_eager": geomean([r["eager_ms"] / r["default_ms"] for r in ok]),
            "failed_or_wrong": len(rows) - len(ok),
        },
        "shapes": rows,
    }


def heldout_bucket_lines(heldout: dict[str, Any]) -> list[str]:
    """The held-out section of the bucket report."""
    lines = [
        "", "## The held-out half (never timed for a pick)", "",
        f"Summary: `{json.dumps(heldout['summary'])}`", "",
        "| bucket | shape | eager ms | default ms | pick | ms | pick vs eager |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]  # fmt: skip
    for r in heldout["shapes"]:
        lines.append(
            f"| {r['bucket']} | {r['op']} {r['M']}x{r['N']}x{r['K']} | {r['eager_ms']:.4f} | "
            f"{r['default_ms']:.4f} | {r['pick']} | {r['pick_ms']:.4f} | "
            f"{r['eager_ms'] / r['pick_ms']:.3f} |"
        )  # fmt: skip
    return lines
