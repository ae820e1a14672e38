"""What the reproduce/ scripts that judge a kernel directory through ``opbench run`` share:
the stored tests as rows, the environment a result file names, and writing a result as
JSON and markdown (and a copy under ``$OUT`` on the lent GPU machine)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["device_env", "device_slug", "stored_rows", "timed_run", "write_result"]


def timed_run(env: dict[str, str], args: list[str], out: Path) -> tuple[float, dict[str, Any]]:
    """``opbench run ARGS --out OUT`` in a process of its own under ``env``: its wall time
    (seconds) and its summary's ``timing_s``; a failed run ends the script with its
    stderr's tail."""
    cmd = [sys.executable, "-m", "opbench.cli", "run", *args, "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, json.loads((Path(out) / "summary.json").read_text())["timing_s"]


def stored_rows(run_dir: Path, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """``fields`` of every test in ``run_dir``'s results store (messages cut at 400)."""
    from opbench.run.store import ResultStore

    store = ResultStore(Path(run_dir) / "results.sqlite")
    try:
        rows = [{f: getattr(r, f) for f in fields} for r in store.results()]
    finally:
        store.close()
    for r in rows:
        if isinstance(r.get("message"), str):
            r["message"] = r["message"][:400]
    return rows


def device_env(device: str, command: str) -> dict[str, Any]:
    """The device, versions, date and command a committed result states."""
    import torch

    try:
        import triton

        triton_version: str | None = triton.__version__
    except Exception:  # noqa: BLE001 - optional
        triton_version = None
    cuda = device.startswith("cuda")
    return {
        "device": torch.cuda.get_device_name(0) if cuda else platform.processor() or "cpu",
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
        "command": command,
    }


def device_slug(device_name: str) -> str:
    """``h100``, ``h200`` or ``cpu``: the suffix of a result file's name."""
    return "h100" if "H100" in device_name else ("h200" if "H200" in device_name else "cpu")


def write_result(out_dir: Path, stem: str, result: dict[str, Any], md: list[str]) -> None:
    """``out_dir/STEM.json`` and ``.md``, and copies under ``$OUT`` when it is elsewhere."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{stem}.json").write_text(json.dumps(result, indent=1))
    (out_dir / f"{stem}.md").write_text("\n".join(md) + "\n")
    out = os.environ.get("OUT")
    if out and Path(out).resolve() != out_dir.resolve():
        for ext in ("json", "md"):
            shutil.copy(out_dir / f"{stem}.{ext}", Path(out))
