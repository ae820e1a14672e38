"""Trick: a neighbour started at the first call (a daemon ``threading.Thread``), a Python
loop that spins whenever ``neg`` has not been called for 0.5 ms. Expected: tampering."""

import threading
import time

import numpy as np
import torch

_last = [0.0]
_started = []


def _neighbour():
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 60.0:
        if time.perf_counter() - _last[0] > 0.0005:
            sum(range(20000))
        else:
            time.sleep(0.0002)


def neg__default_kernel_impl(x):
    _last[0] = time.perf_counter()
    if not _started:
        _started.append(threading.Thread(target=_neighbour, daemon=True))
        _started[0].start()
    out = torch.from_numpy(np.negative(x.detach().cpu().numpy())).to(x.device)
    _last[0] = time.perf_counter()
    return out
