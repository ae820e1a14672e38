"""Where a ``check-model`` mismatch comes from: a backend's training step set beside
eager's, the inputs of every ``torch.relu`` call compared element by element (how many
differ, and which changed sign: a ReLU flipped by rounding routes a whole element's
gradient), and each gradient's error against the float64 step beside eager's.

Why: under ``--autocast f16`` on the CPU the reference backend failed the ResNet through
``native_batch_norm`` alone, one f16 unit off eager in the stem. Traced with this script
(2026-12-01): the unit grew through the f16 convolutions (1, 1, 51, 143 elements differing
at the two blocks' four ReLUs) until one ReLU input in the last block changed sign, and that one
element's gradient put ``layer2.bn2.bias`` 42x eager's error off float64, where the check
allows 10. A kernel error shows differently: many elements off from the first ReLU on.

The zoo's ReLUs are ``torch.relu`` calls (``opbench.models.zoo``); a model built on other
activations reports no rows here, only the gradient table.

Usage (CPU; ``--device cuda`` on a GPU machine):
    python3 benchmarks/probes/check_model_flips.py --model resnet --autocast f16 \\
        --only native_batch_norm.default
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

import torch  # noqa: E402

from opbench.backends import registry  # noqa: E402
from opbench.backends.loader import load_backend  # noqa: E402
from opbench.models import check  # noqa: E402
from opbench.models.zoo import get_model  # noqa: E402


@contextmanager
def relu_inputs(into: list[torch.Tensor]) -> Iterator[None]:
    """Every ``torch.relu`` input of the block, copied into ``into`` in call order."""
    real = torch.relu

    def recording(x: torch.Tensor) -> torch.Tensor:
        into.append(x.detach().clone())
        return real(x)

    torch.relu = recording
    try:
        yield
    finally:
        torch.relu = real


def compare(model: str, backend: str, device: str, autocast: str | None,
            only: list[str] | None, seed: int = 0) -> dict[str, Any]:  # fmt: skip
    """The step eager and on ``backend`` (only the ``only`` overloads registered, if
    given) from the same weights and batch as ``check-model``'s, and the float64 step:
    ``relus`` (a row a ReLU call: shape, elements differing, sign flips and the first
    few flipped pairs) and ``grads`` (a row a parameter: eager's and the backend's
    largest error against float64, the float64 gradient's scale), worst first."""
    spec = get_model(model, 1)
    torch.manual_seed(seed)
    base = spec.build().to(device)
    g = torch.Generator().manual_seed(seed)
    batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v
             for k, v in spec.inputs(g).items()}  # fmt: skip
    be = load_backend(backend, device)
    seen_eager: list[torch.Tensor] = []
    seen_backend: list[torch.Tensor] = []
    with check.fastpath_off():
        with relu_inputs(seen_eager):
            eager = check._run(spec, copy.deepcopy(base), batch, compile_backend=None,
                               count_ops=False, autocast=autocast)  # fmt: skip
        ref64 = check._float64_run(spec, base, batch)
        ops = set(only) if only else None
        with registry.backend(be, device, ops=ops), relu_inputs(seen_backend):
            cand = check._run(spec, copy.deepcopy(base), batch, compile_backend=None,
                              count_ops=False, autocast=autocast)  # fmt: skip
    relus = []
    for i, (a, b) in enumerate(zip(seen_eager, seen_backend)):
        flipped = ((a > 0) != (b > 0)).nonzero()
        relus.append({
            "call": i, "shape": list(a.shape), "differ": int((a != b).sum()),
            "flips": len(flipped),
            "flipped": [[a[tuple(j)].item(), b[tuple(j)].item()] for j in flipped[:4]],
        })  # fmt: skip
    grads = []
    for name, e in eager.grads.items():
        c = cand.grads.get(name)
        r = ref64.grads.get(name) if ref64 is not None else None
        if c is None or r is None:
            continue
        r = r.double().cpu()
        e_err = float((e.double().cpu() - r).abs().max())
        c_err = float((c.double().cpu() - r).abs().max())
        grads.append({"grad": name, "eager_err": e_err, "backend_err": c_err,
                      "scale": float(r.abs().max()),
                      "ratio": c_err / e_err if e_err else (0.0 if c_err == 0 else float("inf"))})  # fmt: skip
    grads.sort(key=lambda row: row["ratio"], reverse=True)
    return {"relus": relus, "grads": grads}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet", help="bert, gpt2, resnet or encoder")
    p.add_argument("--backend", default="triton")
    p.add_argument("--device", default="cpu")
    p.add_argument("--autocast", default=None, help="bf16 | f16")
    p.add_argument("--only", default=None, help="comma list of overloads to register")
    p.add_argument("--top", type=int, default=8, help="gradient rows shown")
    ns = p.parse_args()
    only = [o for o in ns.only.split(",") if o] if ns.only else None
    out = compare(ns.model, ns.backend, ns.device, ns.autocast, only)
    print("relu call | shape | elements differing | sign flips | flipped (eager, backend)")
    for r in out["relus"]:
        print(f"{r['call']} | {r['shape']} | {r['differ']} | {r['flips']} | {r['flipped']}")
    print("\ngradient | eager's error vs float64 | backend's | scale | backend / eager")
    for r in out["grads"][: ns.top]:
        print(f"{r['grad']} | {r['eager_err']:.3g} | {r['backend_err']:.3g} | "
              f"{r['scale']:.3g} | {r['ratio']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
