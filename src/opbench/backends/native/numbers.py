"""Python numbers where an operator's schema says ``Tensor``, handed on as aten's own
entry hands them on.

Why: a model's ``x * 0.125`` reaches ``aten::mul.Tensor`` with ``0.125`` made a *wrapped
number* (a 0-dim CPU tensor that type promotion treats as a number: ``int64 * 0.5`` is
float32, where a plain 0-dim float64 tensor would make it float64), and that is what a
gate on the op receives. A custom operator's Python entry (the judge's gated twin,
``opbench_candidate::mul.Tensor``) refuses a number for a Tensor argument, and a
``TorchDispatchMode`` receives a wrapped number unwrapped (PyTorch converts it back to a
Python number on the way to Python). So the worker makes the wrapped number itself
(``gate.cpp``'s ``wrapped_number``), on every call, as aten's entry does in C++.
"""

from __future__ import annotations

import functools
from typing import Any

from opbench.backends.native.build import loaded_module

__all__ = ["has_numbers", "is_number", "rewrapped", "tensor_args"]

#: what aten's entry converts to a wrapped-number tensor when a Tensor argument gets it
_NUMBERS = (bool, int, float)


def is_number(v: Any) -> bool:
    return type(v) in _NUMBERS


@functools.cache
def tensor_args(func: Any) -> tuple[tuple[int, str], ...]:
    """(position, name) of each argument ``func``'s schema types ``Tensor`` (not
    optional, not a list): where aten's entry takes a Python number and converts it."""
    return tuple(
        (i, a.name) for i, a in enumerate(func._schema.arguments) if str(a.type) == "Tensor"
    )


def has_numbers(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a call of ``func`` passes a Python number for a Tensor argument."""
    return any(
        (i < len(args) and is_number(args[i])) or is_number(kwargs.get(n))
        for i, n in tensor_args(func)
    )


def rewrapped(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``func``'s arguments with each Python number at a Tensor argument made a wrapped
    number (unchanged where there is none, or no gate module to make one). Called on
    every call of a twin, which exists only once the gate is loaded: the loaded module is
    read, not :func:`~opbench.backends.native.build.gate_module`'s locked build check."""
    if not has_numbers(func, args, kwargs):
        return args, kwargs
    module = loaded_module()
    if module is None:
        return args, kwargs
    wrap = module.wrapped_number
    out = list(args)
    for i, n in tensor_args(func):
        if i < len(out) and is_number(out[i]):
            out[i] = wrap(out[i])
        elif is_number(kwargs.get(n)):
            kwargs = {**kwargs, n: wrap(kwargs[n])}
    return tuple(out), kwargs
