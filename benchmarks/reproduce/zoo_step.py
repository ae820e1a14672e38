"""One training step of each model of ``check-model``'s zoo (forward, loss, backward, SGD
step, as ``opbench.models.check`` runs it), for ``opbench trace``: the trace holds the
exact ATen calls, shapes and dtypes the models make, so a judged run of those rows
(``opbench run --suite traces --traces FILE``) is the serve policy that fits them.

Usage (GPU machine; the device is the second argument after ``--``):
    opbench trace benchmarks/reproduce/zoo_step.py -o /tmp/zoo.txt -- cuda bert,gpt2,resnet,encoder
    opbench run --suite traces --traces /tmp/zoo.txt --backend triton --device cuda --out RUN_DIR
    python3 benchmarks/reproduce/check_models.py --policy RUN_DIR
"""

from __future__ import annotations

import sys

import torch

from opbench.models.check import fastpath_off
from opbench.models.graph_timing import training_step
from opbench.models.zoo import MODEL_NAMES, get_model


def main(device: str, names: list[str]) -> None:
    for name in names:
        spec = get_model(name)
        g = torch.Generator().manual_seed(0)
        model = spec.build().to(device)
        batch = {
            k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in spec.inputs(g).items()
        }
        model.train()
        with fastpath_off():
            training_step(spec, model, batch)()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--"]
    main(args[0] if args else "cpu", args[1].split(",") if len(args) > 1 else list(MODEL_NAMES))
