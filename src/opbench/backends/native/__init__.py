"""The C++ gate in front of a backend's registered operators: calls that never enter
Python (``gate.cpp``; built at first use by :mod:`~opbench.backends.native.build`,
installed per registration by :mod:`~opbench.backends.native.gates`, and told how to launch
a kernel by its :class:`~opbench.backends.native.spec.NativeSpec`)."""

from opbench.backends.native.build import gate_module, native_enabled, unavailable_reason
from opbench.backends.native.spec import ATTRIBUTE, NativeSpec

__all__ = ["ATTRIBUTE", "NativeSpec", "gate_module", "native_enabled", "unavailable_reason"]
