"""Scalar math in a kernel's compute type, shared by the op families: libdevice on the
GPU (correctly rounded, where ``tl.exp``'s ``ex2.approx`` loses ~|x| ulp), and forms
that stay accurate on Triton's CPU interpreter, which has no libdevice (``tanh`` near 0,
``expm1`` near 0). ``ON_GPU`` is a constexpr, so each kernel compiles one branch.
"""

from __future__ import annotations

import triton
import triton.language as tl

from opbench.kernels._lib.launch import INTERPRETING as _INTERPRETING

__all__ = ["ON_GPU", "exp_f", "expm1_f", "libdevice", "log_f", "sigmoid_f", "tanh_f"]

#: libdevice exists only for compiled kernels; the interpreter patches tl.math only.
ON_GPU: tl.constexpr = tl.constexpr(not _INTERPRETING)
if not _INTERPRETING:
    from triton.language.extra import libdevice
else:  # never reached in interpreted kernels (ON_GPU is False there)
    libdevice = None


@triton.jit
def tanh_f(x):
    """tanh in the compute type: libdevice on the GPU; on the interpreter a series for
    |x| < 0.4 (where (1 - e^-2|x|) would cancel) and the exponential form elsewhere."""
    if ON_GPU:
        y = libdevice.tanh(x)
    else:
        ax = tl.abs(x)
        t = tl.exp(-2.0 * ax)
        big = (1.0 - t) / (1.0 + t)
        x2 = x * x
        small = ax * (
            1.0
            + x2
            * (
                -1.0 / 3.0
                + x2
                * (
                    2.0 / 15.0
                    + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0 + x2 * (-1382.0 / 155925.0)))
                )
            )
        )
        y = tl.where(ax < 0.4, small, big)
        y = tl.where(x < 0, -y, y)
        y = tl.where(x != x, x, y)
    return y


@triton.jit
def sigmoid_f(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def exp_f(x):
    """exp: libdevice on the GPU (tl.exp's ex2.approx loses ~|x| ulp), tl.exp here."""
    if ON_GPU:
        y = libdevice.exp(x)
    else:
        y = tl.exp(x)
    return y


# Like device_math.exp_f, kept apart: one named jit helper per libdevice function
@triton.jit
def log_f(x):
    if ON_GPU:
        y = libdevice.log(x)
    else:
        y = tl.log(x)
    return y


@triton.jit
def expm1_f(x):
    """expm1: libdevice on the GPU; Kahan's (e^x - 1) * x / log(e^x) here, accurate
    near 0 where e^x - 1 cancels."""
    if ON_GPU:
        y = libdevice.expm1(x)
    else:
        u = tl.exp(x)
        um1 = u - 1.0
        y = um1 * x / tl.log(u)
        y = tl.where(um1 == -1.0, -1.0, y)
        y = tl.where(u == 1.0, x, y)
        y = tl.where(u == float("inf"), u, y)
    return y
