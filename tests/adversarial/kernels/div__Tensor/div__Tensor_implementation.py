"""Trick: hand the work to PyTorch on a second Python thread, where the dispatch mode the
judge enters on the calling thread does not reach. Expected: calls_pytorch."""

import threading

import torch


def div__Tensor_kernel_impl(a, b):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("out", torch.div(a, b)))
    t.start()
    t.join()
    return box["out"]
