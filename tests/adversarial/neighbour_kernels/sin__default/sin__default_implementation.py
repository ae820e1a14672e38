"""Trick: a neighbour started through ``ctypes`` (``pthread_create`` looked up by a name
built from pieces, running a Python callback): invisible to ``threading`` and to the
static scan's thread rules. It spins whenever ``sin`` has not been called for 0.5 ms.
Expected: tampering."""

import ctypes
import time

import numpy as np
import torch

_last = [time.perf_counter()]
_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


def _neighbour(_arg):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 60.0:
        if time.perf_counter() - _last[0] > 0.0005:
            sum(range(20000))
        else:
            time.sleep(0.0002)
    return None


_fn = _CALLBACK(_neighbour)
_tid = ctypes.c_ulong()
_libc = ctypes.CDLL(None)
getattr(_libc, "pthread_" + "create")(ctypes.byref(_tid), None, _fn, None)


def sin__default_kernel_impl(x):
    _last[0] = time.perf_counter()
    out = torch.from_numpy(np.sin(x.detach().cpu().numpy())).to(x.device)
    _last[0] = time.perf_counter()
    return out
