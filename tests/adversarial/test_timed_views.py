"""Honest view ops keep passing with timing on. A view's bytes are its input's, and the
timing rewrites the shared input tensors with the other draw between calls, so a kept
view from an earlier call shows the draw the inputs hold at the end, not its own. Before
the harness knew this (``judge/timed_output.returns_alias``), ``aten.t`` against itself
failed as ``cheat`` whenever a kept call had held the other draw: at random about one
test in five, and on every test once the call before the last was judged too."""

from __future__ import annotations

from pathlib import Path

import adversarial_corpus as corpus
import pytest

VIEWS = """\
Operator: aten.t.default
cnt: 1, ((T([64, 48], f32),), {})
Operator: aten.transpose.int
cnt: 1, ((T([8, 64, 48], f32), 1, 2), {})
Operator: aten.view.default
cnt: 1, ((T([64, 48], f32), [48, 64]), {})
Operator: aten.select.int
cnt: 1, ((T([64, 48], f32), 0, 3), {})
Operator: aten.slice.Tensor
cnt: 1, ((T([64, 48], f32), 1, 0, 10), {})
"""


@pytest.mark.slow
def test_views_of_the_inputs_pass_with_timing_on(tmp_path: Path) -> None:
    by_op = corpus.run_timed(tmp_path, Path("aten"), VIEWS)
    assert sorted(by_op) == sorted(
        ["t.default", "transpose.int", "view.default", "select.int", "slice.Tensor"]
    )
    for op, (r,) in by_op.items():
        assert r.status == "passed" and r.speedup is not None, (op, r.message)
