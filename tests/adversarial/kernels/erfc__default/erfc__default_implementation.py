"""Trick: a thread started at import waits for work and runs it with PyTorch; the
kernel only passes tensors to it and waits. Expected: calls_pytorch."""

import queue
import threading

import torch

_jobs: "queue.Queue" = queue.Queue()


def _serve():
    while True:
        x, box, done = _jobs.get()
        box["out"] = torch.erfc(x)
        done.set()


threading.Thread(target=_serve, daemon=True).start()


def erfc__default_kernel_impl(x):
    box, done = {}, threading.Event()
    _jobs.put((x, box, done))
    done.wait()
    return box["out"]
