"""Shared code of the reference Triton backend: the launch path and one module per op
family. The op folders beside this package (``add__Tensor/``, ``relu_/``, ...) are thin
entry points into these modules; the static scan allows kernels to import
``opbench.kernels`` (:data:`opbench.judge.static_scan.ALLOWED_OPBENCH_MODULES`), so
nothing here may import the judge.
"""
