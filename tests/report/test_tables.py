"""The end-of-run terminal table: fits the terminal, never cuts a name, worst first."""

from rich.console import Console

from opbench.report.tables import print_summary


def _summary() -> dict:
    ops = {
        "aten._log_softmax_backward_data.default": {
            "tests": 4, "passed": 4, "correct": True, "speedup": 1.2, "speedup_host": 0.5,
            "spread": 0.02, "sol_fraction": 0.8,
        },
        "aten.native_batch_norm_backward.default": {
            "tests": 4, "passed": 4, "correct": True, "speedup": 0.6, "speedup_host": 0.3,
        },
        "aten.relu.default": {
            "tests": 2, "passed": 1, "correct": False, "failures": {"wrong_result": 1},
        },
    }  # fmt: skip
    return {
        "suite": "traces", "backend": "triton", "device": "cuda", "run_dir": "runs/x",
        "ops": ops, "tests": {"passed": 9, "total": 10}, "timer": "cuda-events",
        "correctness_score": 2 / 3, "ops_correct": 2, "ops_in_denominator": 3,
    }  # fmt: skip


def _render(width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    print_summary(_summary(), console)
    return console.export_text()


def test_narrow_terminal_keeps_every_name_whole_and_lines_within_width() -> None:
    text = _render(80)
    assert all(len(line) <= 80 for line in text.splitlines())
    # the op column's pieces, top to bottom: a wrapped name continues on the next line
    first_cells = "".join(
        line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")
    )
    for name in ("_log_softmax_backward_data.default", "native_batch_norm_backward.default"):
        assert name in first_cells
    assert "SOL" not in text  # the optional columns go first


def test_wide_terminal_shows_spread_and_roofline_worst_first() -> None:
    text = _render(140)
    assert "SOL" in text and "80%" in text and "2%" in text
    order = [text.index(n) for n in ("relu.default", "native_batch_norm", "_log_softmax")]
    assert order == sorted(order)  # not correct, then slowest, then fastest
