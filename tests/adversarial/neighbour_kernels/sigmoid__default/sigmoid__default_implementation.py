"""Trick: a neighbour that runs only during host-timed rounds. The host-inclusive rounds
give every call its own copy of the inputs, the device-time batches reuse the same
tensors: once several calls in a row have seen fresh tensors, a thread started at import
spins whenever ``sigmoid`` has not been called for 0.5 ms, so only the reference's host
rounds slow down. Expected: tampering."""

import threading
import time

import numpy as np
import torch

_last = [time.perf_counter()]
_seen: list[int] = []
_host = [False]


def _neighbour():
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 60.0:
        if _host[0] and time.perf_counter() - _last[0] > 0.0005:
            sum(range(20000))
        else:
            time.sleep(0.0002)


threading.Thread(target=_neighbour, daemon=True).start()


def sigmoid__default_kernel_impl(x):
    _last[0] = time.perf_counter()
    _seen.append(id(x))
    del _seen[:-4]
    _host[0] = len(set(_seen)) == 4
    a = x.detach().cpu().numpy()
    out = torch.from_numpy((1.0 / (1.0 + np.exp(-a))).astype(a.dtype)).to(x.device)
    _last[0] = time.perf_counter()
    return out
