"""The HTML report in a real browser (Debian's headless chromium, driven by Playwright):
it loads without console errors, shows its charts, and its test table sorts and filters.
The screenshot is kept under ``OPBENCH_SCREENSHOT_DIR`` when set (else pytest's tmp)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

_WRONG_RELU = """
import numpy as np
import torch

def relu_kernel_impl(x):
    a = x.detach().cpu().numpy()
    return torch.from_numpy(np.abs(a)).to(x.device)  # abs, not relu
"""
_NEG = """
import numpy as np
import torch

def neg_kernel_impl(x):
    return torch.from_numpy(-x.detach().cpu().numpy()).to(x.device)
"""
_ADD = """
import numpy as np
import torch

def add__Tensor_kernel_impl(a, b, alpha=1):
    x, y = a.detach().cpu().numpy(), b.detach().cpu().numpy()
    return torch.from_numpy(np.asarray(x + alpha * y, dtype=x.dtype)).to(a.device)
"""


def _chromium() -> str | None:
    return os.environ.get("OPBENCH_CHROMIUM") or shutil.which("chromium")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    kernels = root / "kernels"
    for folder, src in (("relu", _WRONG_RELU), ("neg", _NEG), ("add__Tensor", _ADD)):
        (kernels / folder).mkdir(parents=True)
        (kernels / folder / f"{folder}_implementation.py").write_text(src)
    out = root / "run"
    r = subprocess.run(
        [
            sys.executable, "-m", "opbench.cli", "run", "--suite", "smoke", "--backend",
            str(kernels), "--device", "cpu", "--ops", "relu.default,neg.default,add.Tensor",
            "--out", str(out), "--quiet",
        ],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return out / "report.html"


@pytest.mark.slow
def test_report_is_self_contained_and_shows_sources(report: Path) -> None:
    page = report.read_text()
    for asset in ("<link ", 'src="http', "src='http", "@import"):
        assert asset not in page
    assert page.count("<svg class='chart'") == 3
    assert "Kernel sources" in page and "abs, not relu" in page  # the wrong kernel's source
    assert "Correctness by dtype" in page and "cudnn.conv.fp32_precision" in page


@pytest.mark.slow
def test_report_in_a_real_browser(report: Path, tmp_path: Path) -> None:
    chromium = _chromium()
    if chromium is None:
        pytest.skip("no chromium (apt-get install chromium; .ci/run installs it as root)")
    sync_api = pytest.importorskip("playwright.sync_api")
    shots = Path(os.environ.get("OPBENCH_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(report.as_uri())
        assert problems == []
        assert page.locator("svg.chart").count() == 3

        def ops_column() -> list[str]:
            return page.locator("#tests tbody tr td:nth-child(2)").all_inner_texts()

        def visible_rows() -> int:
            return page.locator("#tests tbody tr:visible").count()

        total = visible_rows()
        assert total >= 3
        header = page.locator("#tests thead th", has_text="op").first
        header.click()
        up = ops_column()
        assert up == sorted(up)
        header.click()
        assert ops_column() == sorted(up, reverse=True)
        page.fill("#filter", "relu")
        assert 0 < visible_rows() < total
        assert all("relu" in r for r in page.locator("#tests tbody tr:visible").all_inner_texts())
        assert page.inner_text("#shown") == str(visible_rows())
        page.fill("#filter", "")
        page.select_option("#status", "failed")
        failed = page.locator("#tests tbody tr:visible td:nth-child(4)").all_inner_texts()
        assert failed and set(failed) == {"failed"}
        page.screenshot(path=str(shots / "report.png"), full_page=True)
        browser.close()
    assert problems == []
    assert (shots / "report.png").stat().st_size > 10_000
