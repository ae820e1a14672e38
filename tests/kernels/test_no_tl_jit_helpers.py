"""No kernel module calls one of ``triton.language``'s own ``@jit`` helpers (``tl.cdiv``,
``tl.sum``, ``tl.zeros``...): opbench's CPU workers may import Triton before
``TRITON_INTERPRET`` is set, and those helpers then raise "Cannot call @triton.jit'd
outside of the scope of a kernel" under the interpreter (CI caught a ``tl.cdiv``
in softmax's looping backward, fixed in fb1de0a, only when the whole suite ran; a subprocess
test in ``test_norm`` shows the failure itself). A static check over every module, so a
kernel path no test happens to reach in that order is covered too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

try:  # under TRITON_INTERPRET the helpers are InterpretedFunction wrappers
    from triton.runtime.interpreter import InterpretedFunction
except ImportError:  # pragma: no cover - a Triton without the interpreter
    InterpretedFunction = JITFunction  # type: ignore[misc,assignment]

LIB = Path(__file__).resolve().parents[2] / "src" / "opbench" / "kernels" / "_lib"
JIT_HELPERS = {
    name for name in dir(tl) if isinstance(getattr(tl, name), (JITFunction, InterpretedFunction))
}


def _uses(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "tl"
            and node.attr in JIT_HELPERS
        ):
            found.append((node.lineno, node.attr))
    return found


def test_the_check_knows_triton_s_jit_helpers() -> None:
    assert {"cdiv", "sum", "zeros"} <= JIT_HELPERS  # else the check below checks nothing


@pytest.mark.parametrize("path", sorted(LIB.glob("*.py")), ids=lambda p: p.name)
def test_no_module_calls_a_tl_jit_helper(path: Path) -> None:
    assert _uses(path) == [], f"{path.name}: tl @jit helpers at (line, name) {_uses(path)}"
