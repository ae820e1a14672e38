"""The trace argument format: ``((args...), {kwargs})`` with ``T([shape], dtype[, stride])``.

This is the format of the TritonBench/BackendBench operator traces. It is parsed with
:mod:`ast` and a whitelist of node types, never with ``eval``: trace files and user
input are untrusted text. Every parsed value keeps enough of its written form
(keyword or positional stride, ``f16`` or ``torch.float16``) that formatting a parsed
line gives back the exact text, which the tests check over every real trace line.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

from opbench.spec import safe_ast

__all__ = [
    "ArgsParseError",
    "ParsedArgs",
    "TensorSpec",
    "described_numel",
    "TorchName",
    "DTYPE_BY_NAME",
    "NAME_BY_DTYPE",
    "parse_args",
    "format_args",
    "format_value",
    "iter_tensor_specs",
]

#: Short dtype names used by the trace format.
DTYPE_BY_NAME: dict[str, torch.dtype] = {
    "f16": torch.float16,
    "f32": torch.float32,
    "f64": torch.float64,
    "bf16": torch.bfloat16,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "u8": torch.uint8,
    "b8": torch.bool,
    "c32": torch.complex32,
    "c64": torch.complex64,
    "c128": torch.complex128,
}
NAME_BY_DTYPE: dict[torch.dtype, str] = {v: k for k, v in DTYPE_BY_NAME.items()}

_ALLOWED_TORCH_TYPES = (torch.dtype, torch.layout, torch.memory_format, torch.device)
_FLOAT_NAMES = {"inf": math.inf, "nan": math.nan}
_CONSTANT_NAMES = {"True": True, "False": False, "None": None}


class ArgsParseError(ValueError):
    """A malformed argument string, located by file, line and column (1-based)."""

    def __init__(
        self,
        message: str,
        *,
        text: str = "",
        column: int | None = None,
        file: str | None = None,
        line: int | None = None,
    ) -> None:
        self.message = message
        self.text = text
        self.column = column
        self.file = file
        self.line = line
        super().__init__(self._render())

    def located(self, file: str | None, line: int | None) -> ArgsParseError:
        """The same error, now naming the file and line it came from."""
        return ArgsParseError(
            self.message, text=self.text, column=self.column, file=file, line=line
        )

    def _render(self) -> str:
        where = []
        if self.file is not None:
            where.append(str(self.file))
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.column is not None:
            where.append(f"column {self.column}")
        prefix = ", ".join(where)
        snippet = self.text if len(self.text) <= 120 else self.text[:117] + "..."
        msg = f"{prefix}: {self.message}" if prefix else self.message
        return f"{msg} in {snippet!r}" if snippet else msg


@dataclass(frozen=True)
class TensorSpec:
    """A tensor described by shape, dtype and optional strides (no data).

    ``stride_style`` remembers how the stride was written (``stride=(...)`` or a
    positional list) so formatting reproduces the original text.
    """

    shape: tuple[int, ...]
    dtype: torch.dtype
    stride: tuple[int, ...] | None = None
    stride_style: str = "keyword"

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def storage_elements(self) -> int:
        """Elements the underlying storage needs (stride 0 dims count once)."""
        if self.stride is None or self.numel == 0:
            return self.numel
        return 1 + sum((n - 1) * abs(s) for n, s in zip(self.shape, self.stride))


@dataclass(frozen=True)
class TorchName:
    """A ``torch.<name>`` attribute written in a trace (``torch.strided``, ``torch.bool``)."""

    name: str  # the full dotted text, e.g. "torch.float16"

    def resolve(self) -> Any:
        """The torch object named; only dtypes, layouts, memory formats and devices.

        Anything else (``torch.os.system``, private names) raises ``AttributeError``:
        trace text is untrusted and must never hand out arbitrary objects.
        """
        parts = self.name.split(".")
        if parts[0] != "torch" or any(not p or p.startswith("_") for p in parts[1:]):
            raise AttributeError(f"{self.name} is not an allowed torch name")
        obj: Any = torch
        for part in parts[1:]:
            obj = getattr(obj, part)
        if not isinstance(obj, _ALLOWED_TORCH_TYPES):
            raise AttributeError(f"{self.name} is not a dtype, layout, memory format or device")
        return obj


@dataclass(frozen=True)
class ParsedArgs:
    """Positional and keyword arguments of one call, as descriptions."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __iter__(self):  # allows ``args, kwargs = parse_args(text)``
        yield self.args
        yield self.kwargs


def parse_args(text: str, *, file: str | None = None, line: int | None = None) -> ParsedArgs:
    """Parse ``((args...), {kwargs})`` into a :class:`ParsedArgs`.

    Raises :class:`ArgsParseError` (naming ``file``, ``line`` and the column) for
    anything that is not valid in the format; never any other exception.
    """
    if not isinstance(text, str):
        raise ArgsParseError(f"expected a string, got {type(text).__name__}", file=file, line=line)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SyntaxWarning for odd escapes in garbage
            tree = safe_ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ArgsParseError(
            f"syntax error: {e.msg}", text=text, column=e.offset, file=file, line=line
        ) from None
    except (ValueError, RecursionError, MemoryError, OverflowError) as e:
        raise ArgsParseError(f"cannot parse: {e}", text=text, file=file, line=line) from None
    body = tree.body
    try:
        if not (isinstance(body, ast.Tuple) and len(body.elts) == 2):
            raise _NodeError("expected ((args...), {kwargs})", body)
        args_node, kwargs_node = body.elts
        if not isinstance(args_node, ast.Tuple):
            raise _NodeError("positional arguments must be a tuple", args_node)
        if not isinstance(kwargs_node, ast.Dict):
            raise _NodeError("keyword arguments must be a dict", kwargs_node)
        args = tuple(_value(n) for n in args_node.elts)
        kwargs = _kwargs(kwargs_node)
    except _NodeError as e:
        col = getattr(e.node, "col_offset", None)
        raise ArgsParseError(
            e.message, text=text, column=None if col is None else col + 1, file=file, line=line
        ) from None
    except RecursionError:
        raise ArgsParseError("nested too deeply", text=text, file=file, line=line) from None
    return ParsedArgs(args, kwargs)


class _NodeError(Exception):
    def __init__(self, message: str, node: ast.AST) -> None:
        self.message = message
        self.node = node


def _kwargs(node: ast.Dict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in zip(node.keys, node.values):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            raise _NodeError("keyword names must be strings", k if k is not None else node)
        if k.value in out:
            raise _NodeError(f"keyword {k.value!r} given twice", k)
        out[k.value] = _value(v)
    return out


def _value(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (bool, int, float, str, complex)) or node.value is None:
            return node.value
        raise _NodeError(f"unsupported literal {node.value!r}", node)
    if isinstance(node, ast.Tuple):
        return tuple(_value(n) for n in node.elts)
    if isinstance(node, ast.List):
        return [_value(n) for n in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _value(node.operand)
        if isinstance(inner, bool) or not isinstance(inner, (int, float, complex)):
            raise _NodeError("a sign must precede a number", node)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Name):
        if node.id in DTYPE_BY_NAME:
            return DTYPE_BY_NAME[node.id]
        if node.id in _FLOAT_NAMES:
            return _FLOAT_NAMES[node.id]
        if node.id in _CONSTANT_NAMES:
            return _CONSTANT_NAMES[node.id]
        raise _NodeError(f"unknown name {node.id!r}", node)
    if isinstance(node, ast.Attribute):
        dotted = _dotted(node)
        if dotted is None or not dotted.startswith("torch."):
            raise _NodeError("only torch.<name> attributes are allowed", node)
        name = TorchName(dotted)
        try:
            name.resolve()
        except AttributeError as e:
            raise _NodeError(
                str(e)
                if "allowed" in str(e) or "dtype, layout" in str(e)
                else f"{dotted} does not exist in this torch",
                node,
            ) from None
        return name
    if isinstance(node, ast.Call):
        return _call(node)
    raise _NodeError(f"unsupported syntax ({type(node).__name__})", node)


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _int_tuple(node: ast.AST, what: str) -> tuple[int, ...]:
    if not isinstance(node, (ast.List, ast.Tuple)):
        raise _NodeError(f"{what} must be a list or tuple of ints", node)
    out = []
    for n in node.elts:
        v = _value(n)
        if isinstance(v, bool) or not isinstance(v, int):
            raise _NodeError(f"{what} must hold ints", n)
        out.append(v)
    return tuple(out)


def _call(node: ast.Call) -> Any:
    fname = _dotted(node.func)
    if fname == "T":
        return _tensor(node)
    if fname in ("torch.device", "device"):
        try:
            args = [_value(a) for a in node.args]
            kwargs = {k.arg: _value(k.value) for k in node.keywords if k.arg is not None}
            if len(kwargs) != len(node.keywords):
                raise _NodeError("** is not allowed", node)
            return torch.device(*args, **kwargs)
        except (RuntimeError, TypeError, ValueError) as e:
            raise _NodeError(f"bad device: {e}", node) from None
    raise _NodeError(f"unknown call {fname or '?'}(...)", node)


def _tensor(node: ast.Call) -> TensorSpec:
    if len(node.args) < 2 or len(node.args) > 3:
        raise _NodeError("T(...) takes a shape, a dtype and an optional stride", node)
    shape = _int_tuple(node.args[0], "shape")
    if any(s < 0 for s in shape):
        raise _NodeError("shape sizes must be >= 0", node.args[0])
    dtype_node = node.args[1]
    dtype = _value(dtype_node)
    if isinstance(dtype, TorchName):
        dtype = dtype.resolve()
    if not isinstance(dtype, torch.dtype):
        raise _NodeError("the second argument of T(...) must be a dtype", dtype_node)
    stride: tuple[int, ...] | None = None
    style = "keyword"
    if len(node.args) == 3:
        stride = _int_tuple(node.args[2], "stride")
        style = "positional"
    for kw in node.keywords:
        if kw.arg != "stride" or stride is not None:
            raise _NodeError("T(...) accepts only one stride", kw.value)
        stride = _int_tuple(kw.value, "stride")
    if stride is not None and len(stride) != len(shape):
        raise _NodeError(f"stride has {len(stride)} entries for a {len(shape)}-d shape", node)
    return TensorSpec(shape, dtype, stride, style)


# --------------------------------------------------------------------------- format


def format_args(obj: ParsedArgs | tuple[Any, Any]) -> str:
    """Format arguments back into trace text (inverse of :func:`parse_args`)."""
    if isinstance(obj, ParsedArgs):
        args, kwargs = obj.args, obj.kwargs
    else:
        args, kwargs = obj
    return f"({format_value(tuple(args))}, {_format_dict(kwargs)})"


def _format_dict(d: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k!r}: {format_value(v)}" for k, v in d.items()) + "}"


def format_value(v: Any) -> str:
    """Format one argument value in the trace syntax."""
    if isinstance(v, TensorSpec):
        dt = NAME_BY_DTYPE.get(v.dtype) or str(v.dtype)  # e.g. torch.float8_e4m3fn
        text = f"T({list(v.shape)!r}, {dt}"
        if v.stride is not None:
            if v.stride_style == "positional":
                text += f", {list(v.stride)!r}"
            else:
                text += f", stride={tuple(v.stride)!r}"
        return text + ")"
    if isinstance(v, torch.dtype):
        if v in NAME_BY_DTYPE:
            return NAME_BY_DTYPE[v]
        return str(v)
    if isinstance(v, TorchName):
        return v.name
    if isinstance(v, torch.device):
        return f"torch.device({str(v)!r})"
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return repr(v)
    if isinstance(v, (int, str, complex)):
        return repr(v)
    if isinstance(v, tuple):
        inner = ", ".join(format_value(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ", ".join(format_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return _format_dict(v)
    raise ValueError(f"cannot format {type(v).__name__} in the trace format")


def iter_tensor_specs(value: Any):
    """Yield every :class:`TensorSpec` inside a (nested) argument value."""
    if isinstance(value, TensorSpec):
        yield value
    elif isinstance(value, ParsedArgs):
        yield from iter_tensor_specs(value.args)
        yield from iter_tensor_specs(value.kwargs)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from iter_tensor_specs(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from iter_tensor_specs(v)


_TENSOR_SHAPE = re.compile(r"T\(\[([0-9, ]*)\]")


def described_numel(args_text: str) -> int:
    """Total elements of the tensors in a trace-format description: a regex over the
    text, no parse (fast enough to rank thousands of cases)."""
    total = 0
    for m in _TENSOR_SHAPE.finditer(args_text):
        total += math.prod(int(d) for d in m.group(1).replace(" ", "").split(",") if d)
    return total
