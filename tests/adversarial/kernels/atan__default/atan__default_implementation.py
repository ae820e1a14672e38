"""Trick: return an output of zeros at once and fill it in later from a thread.
Expected: wrong_result (the output is read when the call returns)."""

import threading
import time

import numpy as np
import torch


def atan__default_kernel_impl(x):
    a = x.detach().cpu().numpy().copy()
    result = torch.from_numpy(np.zeros(a.shape, dtype=a.dtype)).to(x.device)  # filled too late

    def later():
        time.sleep(1.0)
        result.copy_(torch.from_numpy(np.arctan(a)).to(x.device))

    threading.Thread(target=later, daemon=True).start()
    return result
