"""Where a ``check-model`` model's training step spends its GPU time, eager and on the
reference Triton backend: the kernels of a few profiled steps by total device time.

``check-model --time-steps`` says that a model's step is slower on the backend (the tiny
float32 ResNet: 3.4 ms eager, 15.9 on the backend, H100, 2026-11-26); this says which kernels
make the difference, and ``--set MODULE.NAME=VALUE`` (as ``device_profile.py``) tries a
kernel constant without editing the source, so one device call can compare variants.
Float32 runs in IEEE precision on both sides, as ``check-model`` and ``opbench run`` pin it.
The step is the one ``check-model`` times (forward, loss, backward), after two warm-up steps.

Usage (GPU machine, after ``source benchmarks/common/gpu_env.sh``):
    python3 benchmarks/probes/model_profile.py --model resnet --steps 5 --top 12 \
        [--set conv.SMALLK_MAX_K=0 ...] [--json OUT.json]

Open finding (a probe: delete it once settled): one ``check-model --time-steps 5`` run read
15.9 ms for the tiny ResNet's step on the backend (eager 3.4); the next runs read about 3.5
and the cause was not found (docs/triton-backend.md). Last run:
``benchmarks/results/model-profile-resnet-h100-2026-11-26.txt`` (``--model resnet``, three
``--set`` variants).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))


def _step(spec: Any, model: Any, batch: dict[str, Any]) -> None:
    model.zero_grad(set_to_none=True)
    spec.loss(spec.call(model, batch), batch).backward()


def profile_steps(spec: Any, model: Any, batch: dict[str, Any], steps: int) -> dict[str, Any]:
    """Median wall ms of ``steps`` synchronized steps, then the CUDA kernels of ``steps``
    profiled steps: name -> (calls, total device µs), the step's total device µs."""
    for _ in range(2):
        _step(spec, model, batch)
    torch.cuda.synchronize()
    walls = []
    for _ in range(steps):
        t = time.perf_counter()
        _step(spec, model, batch)
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t) * 1e3)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            _step(spec, model, batch)
        torch.cuda.synchronize()
    kernels: dict[str, list[float]] = {}
    for ev in prof.key_averages():
        if ev.device_type == torch.autograd.DeviceType.CUDA and ev.device_time_total > 0:
            kernels[ev.key[:100]] = [ev.count / steps, ev.device_time_total / steps]
    return {
        "step_ms_median": round(statistics.median(walls), 3),
        "device_us_per_step": round(sum(v[1] for v in kernels.values()), 1),
        "kernels": dict(sorted(kernels.items(), key=lambda kv: -kv[1][1])),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet", help="bert, gpt2, resnet or encoder")
    p.add_argument("--scale", type=int, default=1)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--top", type=int, default=12, help="kernels listed per side")
    p.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE")
    p.add_argument("--json", help="write both sides' profiles here")
    a = p.parse_args()

    from kernel_overrides import apply_overrides

    import opbench
    from opbench.instrument.settings import pinned
    from opbench.models.zoo import get_model

    overrides = apply_overrides(a.set)
    spec = get_model(a.model, a.scale)
    torch.manual_seed(0)
    model = spec.build().cuda()
    g = torch.Generator().manual_seed(0)
    batch = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in spec.inputs(g).items()}
    result: dict[str, Any] = {"model": a.model, "scale": a.scale, "overrides": overrides,
                              "gpu": torch.cuda.get_device_name()}  # fmt: skip
    with pinned():
        result["eager"] = profile_steps(spec, model, batch, a.steps)
        with opbench.backend("triton", device="cuda"):
            result["backend"] = profile_steps(spec, model, batch, a.steps)
    for side in ("eager", "backend"):
        r = result[side]
        print(f"{a.model} {side}: {r['step_ms_median']} ms a step (wall), "
              f"{r['device_us_per_step']} us of kernels a step {overrides or ''}")  # fmt: skip
        for name, (calls, us) in list(r["kernels"].items())[: a.top]:
            print(f"  {us:9.1f} us  {calls:5.1f}x  {name}")
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
