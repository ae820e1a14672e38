"""The references a program candidate is judged against, computed in the HARNESS.

The harness builds the problem's ``Model`` itself (seeded, on the CPU, then moved: the
weights are then what KernelBench would draw), keeps its ``state_dict`` to send to the
worker (both sides of the worker load exactly these weights by name), and for each trial
seed builds its own inputs and computes:

* ``eager``: the model as written, on those inputs (what PyTorch gives);
* ``ref``: the same model in float64 on upcast inputs, the yardstick of opbench's
  correctness rule (:mod:`opbench.judge.correctness`); None when the model cannot run
  in float64 (then eager is the reference and only the dtype floors apply).

Candidate code never runs in this process, so nothing can reach these tensors.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch

from opbench.instrument import tensors
from opbench.programs.inputs import build_model, call_sized, make_inputs, tensors_of

__all__ = ["Built", "Expected", "build", "expect"]


@dataclass
class Built:
    """The harness's reference model and what the worker needs to rebuild it."""

    model: Any
    init: list[Any]
    state_dict: dict[str, torch.Tensor]
    model64: Any = None
    float64_note: str | None = None


@dataclass
class Expected:
    """What one trial seed must give: eager's and the float64 outputs (on the CPU)."""

    seed: int
    eager: Any
    ref: Any
    eager_devices: dict[str, str] = field(default_factory=dict)
    input_digests: list[str] = field(default_factory=list)
    ref_note: str | None = None


def build(module: Any, size: str | None, device: str, seed: int) -> Built:
    """The reference ``Model`` (raises what the problem raises: not runnable here)."""
    init = list(call_sized(module.get_init_inputs, size))
    model = build_model(module.Model, init, seed, device)
    state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    built = Built(model=model, init=init, state_dict=state)
    try:
        built.model64 = copy.deepcopy(model).to(torch.float64)
    except Exception as e:  # a model that cannot be copied or cast: eager is the reference
        built.float64_note = f"no float64 reference ({type(e).__name__}: {e})"
    return built


def _upcast(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point():
            return obj.to(torch.float64)
        if obj.is_complex():
            return obj.to(torch.complex128)
        return obj.clone()
    if isinstance(obj, (list, tuple)):
        seq = [_upcast(v) for v in obj]
        return seq if isinstance(obj, list) else tuple(seq)
    return obj


def _device_map(obj: Any) -> dict[str, str]:
    return {
        m["path"]: m["device"]
        for m in tensors.output_meta(obj)
        if m.get("kind") == "tensor" and "device" in m
    }


def expect(built: Built, module: Any, seed: int, size: str | None, device: str) -> Expected:
    """Eager and float64 outputs for ``seed`` (each on its own fresh inputs)."""
    args = make_inputs(module, seed, size, device)
    digests = [tensors.elements_digest(t) for t in tensors_of(args)]
    with torch.no_grad():
        eager = built.model(*[_clone(a) for a in args])
        devices = _device_map(eager)
        eager_cpu = tensors.cpu_outputs(eager)
        del eager
        ref = None
        note = built.float64_note
        if built.model64 is not None:
            try:
                ref = tensors.cpu_outputs(built.model64(*_upcast(args)))
            except Exception as e:
                note = f"no float64 reference ({type(e).__name__}: {str(e)[:200]})"
    return Expected(
        seed=seed,
        eager=eager_cpu,
        ref=ref,
        eager_devices=devices,
        input_digests=digests,
        ref_note=note,
    )


def _clone(obj: Any) -> Any:
    return obj.clone() if isinstance(obj, torch.Tensor) else obj
