"""Compiled ``torch.compile`` baselines that survive the sandbox, warmed in parallel.

The ``torch.compile`` baseline of a program problem is compiled inside the worker, before
any candidate code is imported; but a sandboxed worker's ``/tmp`` (where Inductor keeps
its cache) is discarded when it exits, so every run, every resumed run and every
candidate the agent loop judges paid 10-60 s per problem to compile the same reference
again, one problem at a time.

Here the HARNESS warms a per-problem cache ahead of the workers, in a trusted child
process that runs no candidate code (the problem's ``Model`` only, as the harness's own
reference step does), several problems at a time, and keeps it under
``$OPBENCH_COMPILE_CACHE`` (default ``~/.cache/opbench/compile``), one folder per
problem source, size, device model and PyTorch/Triton version. Workers see the cache
read-only and copy their problem's folder into their private Inductor cache before
compiling (:func:`restore`): the compile is then a cache hit (measured on the CPU for
``level2/04_add_layernorm``: 11.5 s cold, 3.8 s from a copied cache; Dynamo still
traces). A worker never writes the shared cache, so a candidate cannot poison the
baseline of a later run. A folder appears only when its compile finished (built beside
it, then renamed), so an interrupted warm-up leaves nothing half-written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from opbench.run.bounded import run_bounded

__all__ = ["cache_root", "entry_for", "restore", "warm"]

#: The file that marks a finished entry (with how long its compile took).
DONE = "complete.json"


def cache_root() -> Path:
    """``$OPBENCH_COMPILE_CACHE``, else ``~/.cache/opbench/compile``."""
    env = os.environ.get("OPBENCH_COMPILE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "opbench" / "compile"


def _device_model(device: str) -> str:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return f"cpu-{platform.machine()}"


def entry_for(root: Path, problem: Path, size: str | None, device: str) -> Path:
    """The folder of one problem's compiled baseline: keyed by everything that changes
    what Inductor generates (the source, the size, the device model, the versions)."""
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except Exception:
        triton_version = None
    key = json.dumps(
        [
            hashlib.sha256(Path(problem).read_bytes()).hexdigest(),
            size,
            _device_model(device),
            torch.__version__,
            triton_version,
            sys.version_info[:2],
        ]
    )
    return root / f"{Path(problem).stem[:40]}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def warm(problem: Path, size: str | None, device: str, root: Path, timeout_s: float) -> dict:
    """Compile ``problem``'s reference into its cache entry unless it is there already.

    Returns ``{"path", "hit"}`` (``hit``: the entry existed), plus ``compile_s`` when
    compiled now, or ``{"error"}`` (the worker then compiles cold, as without a cache)."""
    entry = entry_for(root, problem, size, device)
    if (entry / DONE).is_file():
        return {"path": str(entry), "hit": True}
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=root))
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(scratch / "inductor"))
    cmd = [sys.executable, "-m", "opbench.programs.compile_cache", str(problem), "--device", device]
    cmd += ["--size", size] if size else []
    t0 = time.perf_counter()
    try:
        p = run_bounded(cmd, env=env, timeout=timeout_s)
        if p.returncode != 0:
            tail = (p.stderr.strip().splitlines() or [f"exit code {p.returncode}"])[-1]
            return {"error": f"warming the compile cache failed: {tail[-300:]}"}
        compile_s = round(time.perf_counter() - t0, 2)
        (scratch / DONE).write_text(json.dumps({"compile_s": compile_s, "problem": str(problem)}))
        try:
            scratch.rename(entry)
        except OSError:  # another run finished the same entry first: keep theirs
            pass
        return {"path": str(entry), "hit": False, "compile_s": compile_s}
    except subprocess.TimeoutExpired:
        return {"error": f"warming the compile cache took over {timeout_s:.0f} s"}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def restore(entry: str | Path) -> int:
    """In the worker, before ``torch.compile``: copy a finished entry into this process's
    Inductor cache. Returns the number of files copied (0: no usable entry)."""
    entry = Path(entry)
    if not (entry / DONE).is_file() or not (entry / "inductor").is_dir():
        return 0
    target = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not target:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        target = cache_dir()
    shutil.copytree(entry / "inductor", target, dirs_exist_ok=True)
    return sum(len(files) for _, _, files in os.walk(entry / "inductor"))


def _compile_once(problem: Path, size: str | None, device: str) -> None:
    """Build the reference as the worker does and run its compiled twin once."""
    import torch

    from opbench.instrument.tensors import bind_device, sync
    from opbench.programs import loader
    from opbench.programs.inputs import build_model, call_sized, make_inputs

    mod = loader.load_module(problem)
    model = build_model(mod.Model, list(call_sized(mod.get_init_inputs, size)), 0, "cpu")
    model = model.to(device)
    bind_device(device)
    with torch.no_grad():
        torch.compile(model)(*make_inputs(mod, 0, size, device))
    sync(device)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Compile one problem's reference (cache warm-up).")
    ap.add_argument("problem", type=Path)
    ap.add_argument("--size", default=None)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    _compile_once(args.problem, args.size, args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
