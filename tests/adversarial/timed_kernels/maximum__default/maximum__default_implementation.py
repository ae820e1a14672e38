"""Trick: lazy only while device-timed. The device-time loop calls a kernel again and
again on the same input tensors; the host-inclusive rounds give every call a fresh copy,
and so do the correctness trials. So: compute whenever the inputs are new, hand back the
previous answer while they are the same, and stop being lazy for good once a long run
of fresh inputs shows the host rounds have begun (the calls after them, which the
harness always judges, are then computed). The device speedup is the time of doing
nothing; the last two calls and a sample drawn among thousands of host-timed calls are
right. Expected with timing on: cheat (the harness also judges two consecutive
device-timed calls on different input draws)."""

import numpy as np
import torch

_state = {"last": None, "answer": None, "fresh_run": 0, "honest": False}


def maximum__default_kernel_impl(a, b):
    st = _state
    same = st["last"] is not None and st["last"][0] is a and st["last"][1] is b
    st["fresh_run"] = 0 if same else st["fresh_run"] + 1
    if st["fresh_run"] >= 50:
        st["honest"] = True
    if same and not st["honest"]:
        return st["answer"].clone()
    out = torch.from_numpy(np.maximum(a.detach().cpu().numpy(), b.detach().cpu().numpy()))
    st["last"], st["answer"] = (a, b), out.to(a.device)
    return st["answer"].clone()
