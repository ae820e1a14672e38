"""Trick: phone home (open a TCP connection to a listener the test started on this
machine). Raises if it cannot. Expected under the sandbox: error (no network)."""

import os
import socket

import numpy as np
import torch


def frac__default_kernel_impl(x):
    port = int(os.environ.get("OPBENCH_ADV_PORT", "9"))
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(b"leak")
    a = x.detach().cpu().numpy()
    return torch.from_numpy((a - np.trunc(a)).astype(a.dtype)).to(x.device)
