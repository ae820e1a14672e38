"""``benchmarks/probes/small_elementwise.py``'s verdicts that the docs cite: the float32
edge check (NaN kept, denormals, signed zeros and infinities, 2 ulp otherwise) and the
report's rows, on made-up results; and its lean kernel against eager under Triton's
interpreter."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "probes"))

import small_elementwise as se  # noqa: E402

EDGES = torch.tensor(se.EDGES, dtype=torch.float32)


def _with(index: int, value: float, base: torch.Tensor) -> torch.Tensor:
    out = base.clone()
    out[index] = value
    return out


def test_edges_agree_names_each_input_that_differs() -> None:
    want = torch.rsqrt(EDGES)
    assert se._edges_agree(want.clone(), want) == "yes"
    one_ulp = want.clone()
    finite = torch.isfinite(want) & (want != 0)
    one_ulp[finite] = torch.nextafter(want[finite], torch.tensor(math.inf))
    assert se._edges_agree(one_ulp, want) == "yes"  # within 2 ulp
    i = se.EDGES.index(1e-40)  # a float32 denormal flushed: inf where eager is finite
    flushed = se._edges_agree(_with(i, math.inf, want), want)
    assert flushed.startswith("1e-40: inf (eager 1.0000")
    # the sign of an infinite result (list.index would find +0.0: 0.0 == -0.0)
    j = next(k for k, v in enumerate(se.EDGES) if v == 0 and math.copysign(1, v) < 0)
    assert "-0.0: inf (eager -inf)" in se._edges_agree(_with(j, math.inf, want), want)
    hs = torch.nn.functional.hardsigmoid(EDGES)  # NaN must stay NaN
    assert se._edges_agree(_with(0, 0.0, hs), hs) == "nan: 0.0 (eager nan)"
    far = se._edges_agree(_with(se.EDGES.index(0.25), float(hs[10]) * 1.01, hs), hs)
    assert far.startswith("0.25:")


def test_report_has_a_row_per_callable_with_both_clocks() -> None:
    rows = [
        {"op": "rsqrt", "shape": [32, 1, 14, 14], "callable": "eager", "agrees": True,
         "edges": "yes", "kernel_us": 0.96, "event_us": 4.45},
        {"op": "rsqrt", "shape": [32, 1, 14, 14], "callable": "flag_gems", "agrees": False,
         "edges": "1e-40: inf (eager 1e+20)", "kernel_us": 0.92, "event_us": 4.42},
    ]  # fmt: skip
    text = se.report({"device": "D", "torch": "T", "triton": "3", "flag_gems": "5",
                      "command": "C", "rows": rows})  # fmt: skip
    assert "| rsqrt | (32, 1, 14, 14) | eager | yes | yes | 0.96 | 4.45 | 3.49 |" in text
    assert "| flag_gems | NO | 1e-40: inf (eager 1e+20) | 0.92 | 4.42 | 3.50 |" in text


def test_the_lean_kernel_computes_the_ops_scalar_function() -> None:
    """The three-parameter kernel the probe times runs our own scalar function: its
    results must be eager's (a faster wrong kernel would mean nothing)."""
    from opbench.kernels._lib import activations

    x = torch.linspace(-5, 5, 300, dtype=torch.float32)
    y = torch.empty_like(x)
    se._lean[(3,)](x, y, x.numel(), FN=activations._hardsigmoid, BLOCK=128)
    torch.testing.assert_close(y, torch.nn.functional.hardsigmoid(x))
