"""A full-page screenshot of a run's ``report.html`` in headless Chromium (Debian's
``chromium`` driven by Playwright, as the browser test does), for docs/.

The report is self-contained, so a run directory carried back from the GPU machine
renders here unchanged; the script fails if the page logs a console error.

Usage: python benchmarks/reproduce/screenshot_report.py RUN_DIR OUT.png [--width 1400]
           [--section "Backend settings"] [--max-height 4000]
``--section`` shots the part of the page from that heading to the next one (a report
of 900 tests is ~9 MB as one full page); ``--max-height`` cuts a full page short.

Committed results: ``docs/report-gpu-traces-top.png``, ``docs/report-gpu-traces-settings.png``
(``--section "Backend settings"``) and ``docs/report-gpu-opinfo-top.png``, from the run
directories behind ``benchmarks/results/triton-h100.json`` and ``triton-h100-opinfo.json``
(not files under ``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

#: The page box from the <h2> whose text is the argument down to the next <h2>.
_SECTION_BOX = """(title) => {
  const hs = [...document.querySelectorAll('h2')];
  const i = hs.findIndex(h => h.textContent.trim().startsWith(title));
  if (i < 0) return null;
  const top = hs[i].getBoundingClientRect().top + window.scrollY;
  const end = i + 1 < hs.length
    ? hs[i + 1].getBoundingClientRect().top + window.scrollY
    : document.body.scrollHeight;
  return {x: 0, y: top - 8, width: document.body.scrollWidth, height: end - top};
}"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--section", help="the text of an <h2> heading: shoot that section")
    ap.add_argument("--max-height", type=int, default=0, help="px; 0: the whole page")
    opt = ap.parse_args()
    report = (opt.run_dir / "report.html").resolve()
    if not report.exists():
        print(f"error: {report} does not exist", file=sys.stderr)
        return 2
    chromium = os.environ.get("OPBENCH_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        print("error: no chromium (apt-get install chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": opt.width, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        opt.out.parent.mkdir(parents=True, exist_ok=True)
        if opt.section:
            box = page.evaluate(_SECTION_BOX, opt.section)
            if box is None:
                print(f"error: no <h2> heading {opt.section!r}", file=sys.stderr)
                return 2
            page.screenshot(path=str(opt.out), full_page=True, clip=box)
        elif opt.max_height:
            height = min(opt.max_height, page.evaluate("document.body.scrollHeight"))
            clip = {"x": 0, "y": 0, "width": opt.width, "height": height}
            page.screenshot(path=str(opt.out), full_page=True, clip=clip)
        else:
            page.screenshot(path=str(opt.out), full_page=True)
        browser.close()
    if errors:
        print("console errors:\n" + "\n".join(errors), file=sys.stderr)
        return 1
    print(f"wrote {opt.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
