"""The report's SVG charts: well-formed, one mark per value, empty states that say why."""

import re
import xml.etree.ElementTree as ET

from opbench.report import charts

_NS = "{http://www.w3.org/2000/svg}"


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # raises on malformed markup


def test_histogram_bins_and_tooltips() -> None:
    root = _parse(charts.speedup_histogram([0.5, 1.0, 2.0, 2.0, float("nan"), 0.0]))
    bars = root.findall(f"{_NS}rect")
    titles = [b.find(f"{_NS}title").text for b in bars]  # type: ignore[union-attr]
    assert len(bars) == 3  # 0.5x, 1x and the two 2x tests share a bin
    assert any(t.startswith("2 tests") for t in titles)
    assert "4 tests, geomean 1.189x" in ET.tostring(root, encoding="unicode")


def test_per_op_places_faster_ops_to_the_right() -> None:
    svg = charts.per_op_speedups([("aten.b", 2.0, 1.5, 3.0), ("aten.a", 0.5, 0.4, 0.6)])
    root = _parse(svg)
    dots = {
        c.find(f"{_NS}title").text.split(":")[0]: float(c.get("cx"))  # type: ignore[union-attr]
        for c in root.findall(f"{_NS}circle")
    }
    assert dots["aten.b"] > dots["aten.a"]


def test_empty_charts_say_why() -> None:
    assert "no timed tests" in charts.speedup_histogram([])
    assert "no test has a roofline" in charts.speedup_vs_roofline([(None, 1.0, "x")])  # type: ignore[list-item]
    scatter = _parse(charts.speedup_vs_roofline([(0.5, 1.0, "a<b>")]))
    assert len(scatter.findall(f"{_NS}circle")) == 1
    assert re.search(r"a&lt;b&gt;", ET.tostring(scatter, encoding="unicode"))


def test_per_op_chart_of_a_program_run_uses_each_problems_tests() -> None:
    """Program problems are keyed by their id, not ``aten.<op>``: the chart's range for a
    problem comes from its own tests (it fell back to the geomean alone before)."""
    from opbench.report.html import _charts
    from opbench.run.store import TestResult

    results = [
        TestResult(test_id=f"level1/19_relu:{i}", op="level1/19_relu", status="passed", speedup=s)
        for i, s in enumerate((1.2, 1.8))
    ]
    html = "".join(_charts({"ops": {"level1/19_relu": {"speedup": 1.47}}}, results))
    assert "level1/19_relu: 1.470x (tests 1.200x-1.800x)" in html


def test_gpu_state_reads_as_clocks_temperature_and_power() -> None:
    from opbench.report.html import _gpu_state

    state = {
        "start": [{"clocks.sm": "1980 MHz", "temperature.gpu": "41", "power.draw": "127 W"}],
        "end": [{"clocks.sm": "1755 MHz", "temperature.gpu": "63", "power.draw": "690 W"}],
    }
    line = _gpu_state(state)
    assert line == (
        "start: sm 1980 MHz, temperature.gpu 41, power.draw 127 W; "
        "end: sm 1755 MHz, temperature.gpu 63, power.draw 690 W"
    )
    assert _gpu_state({"error": "no nvidia-smi"}) == '{"error": "no nvidia-smi"}'
