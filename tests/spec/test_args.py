"""The trace argument format: exact round-trips on real traces, and property tests."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opbench.spec.args import (
    DTYPE_BY_NAME,
    ArgsParseError,
    ParsedArgs,
    TensorSpec,
    TorchName,
    format_args,
    iter_tensor_specs,
    parse_args,
)

pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")  # ast on garbage text


def traces_dir() -> Path:
    env = os.environ.get("OPBENCH_TEST_TRACES")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"


_CNT = re.compile(r"^cnt: (\d+), (.*)$")


def _trace_lines() -> list[tuple[str, int, str]]:
    out = []
    for f in sorted(traces_dir().rglob("*.txt")):
        for lineno, line in enumerate(f.read_text().splitlines(), start=1):
            m = _CNT.match(line)
            if m:
                out.append((str(f), lineno, m.group(2)))
    return out


@pytest.mark.slow  # over 1.5 s on 2 cores (2026-11-28, --durations)
def test_round_trip_every_trace_line() -> None:
    """parse -> format gives back the exact text of every real argument line."""
    if not traces_dir().is_dir():
        pytest.skip(f"traces not found at {traces_dir()} (set OPBENCH_TEST_TRACES)")
    lines = _trace_lines()
    assert len(lines) == 23_513, "the shared traces changed: update this count"
    bad = []
    for file, lineno, text in lines:
        parsed = parse_args(text, file=file, line=lineno)
        if format_args(parsed) != text:
            bad.append((file, lineno, text))
    assert not bad, f"{len(bad)} lines do not round-trip, first: {bad[0]}"


# --------------------------------------------------------------------------- forms absent from the traces


def test_positional_and_keyword_strides_round_trip() -> None:
    for text in (
        "((T([96, 1000], f16, [1, 96]),), {})",
        "((T([96, 1000], f16, stride=(0, 0)),), {})",
        "((T([2, 3], bf16, [0, 1]), T([], f32, [])), {'out': T([2, 3], bf16, stride=(3, 1))})",
    ):
        assert format_args(parse_args(text)) == text
    pos = parse_args("((T([4, 5], f32, [1, 4]),), {})").args[0]
    kw = parse_args("((T([4, 5], f32, stride=(1, 4)),), {})").args[0]
    assert pos.stride == kw.stride == (1, 4)
    assert (pos.stride_style, kw.stride_style) == ("positional", "keyword")


def test_synthetic_cnt_zero_line_parses() -> None:
    line = "cnt: 0, ((T([10, 10], f16), T([10, 10], f16)), {})"
    m = _CNT.match(line)
    assert m and m.group(1) == "0"
    parsed = parse_args(m.group(2))
    assert [s.shape for s in iter_tensor_specs(parsed)] == [(10, 10), (10, 10)]


def test_values_of_every_kind() -> None:
    text = (
        "((T([2], f16), 1, f16, -inf, inf, None, True, 'mean', [1, (2, T([3], i64))], "
        "torch.strided, torch.contiguous_format), {'device': 'cuda', 'dtype': torch.float16})"
    )
    p = parse_args(text)
    assert p.args[2] is torch.float16
    assert p.args[3] == -math.inf and p.args[4] == math.inf
    assert isinstance(p.args[9], TorchName) and p.args[9].resolve() is torch.strided
    assert p.kwargs["dtype"].resolve() is torch.float16
    assert format_args(p) == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "((T([2], f16),)",
        "((T([2], q16),), {})",
        "((__import__('os').system('true'),), {})",
        "((T([2, 3], f16, stride=(1,)),), {})",
        "((T([-1], f16),), {})",
        "((x,), {})",
        "((1,), {1: 2})",
        "((lambda: 1,), {})",
    ],
)
def test_malformed_raises_args_parse_error(text: str) -> None:
    with pytest.raises(ArgsParseError) as info:
        parse_args(text, file="model.txt", line=7)
    assert "model.txt" in str(info.value) and "line 7" in str(info.value)


# --------------------------------------------------------------------------- properties

_DTYPES = list(DTYPE_BY_NAME.values())
_TORCH_NAMES = [
    "torch.strided",
    "torch.contiguous_format",
    "torch.channels_last",
    "torch.preserve_format",
    "torch.float16",
    "torch.sparse_coo",
]


@st.composite
def tensor_specs(draw) -> TensorSpec:
    shape = tuple(draw(st.lists(st.integers(0, 9), max_size=4)))
    dtype = draw(st.sampled_from(_DTYPES))
    style = draw(st.sampled_from(["none", "keyword", "positional"]))
    if style == "none":
        return TensorSpec(shape, dtype)
    stride = tuple(draw(st.lists(st.integers(0, 1000), min_size=len(shape), max_size=len(shape))))
    return TensorSpec(shape, dtype, stride, style)


_scalars = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),  # includes inf and -inf
    st.none(),
    st.booleans(),
    st.text(max_size=8),
    st.sampled_from(_DTYPES),
    st.sampled_from(_TORCH_NAMES).map(TorchName),
    st.sampled_from(["cpu", "cuda", "cuda:1"]).map(torch.device),
    tensor_specs(),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple)),
    max_leaves=12,
)
_kwargs = st.dictionaries(
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), _values, max_size=4
)


@pytest.mark.slow  # over 1.5 s on 2 cores (2026-11-28, --durations)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_values, max_size=5).map(tuple), _kwargs)
def test_format_then_parse_is_identity(args: tuple, kwargs: dict) -> None:
    original = ParsedArgs(args, kwargs)
    text = format_args(original)
    assert parse_args(text) == original
    assert format_args(parse_args(text)) == text


def _parse_or_error(text: str) -> None:
    try:
        parse_args(text)
    except ArgsParseError:
        pass  # the only exception allowed


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_garbage_raises_only_args_parse_error(text: str) -> None:
    _parse_or_error(text)


_alphabet = st.sampled_from(
    list("()[]{},:'\"=.-+*T fi0123456789eEjx_\\") + ["torch.", "inf", "nan"]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_alphabet, max_size=60).map("".join))
def test_near_valid_garbage_raises_only_args_parse_error(text: str) -> None:
    _parse_or_error(text)


@pytest.mark.slow  # 1.0-2.0 s, over 1.5 s in 4 of 5 runs (2026-11-28, --durations)
@settings(max_examples=300, deadline=None)
@given(
    st.lists(_values, min_size=1, max_size=3).map(tuple),
    st.integers(0, 200),
    st.integers(1, 4),
    st.text(max_size=3),
)
def test_mutated_valid_text_raises_only_args_parse_error(args, at, cut, insert) -> None:
    text = format_args(ParsedArgs(args, {}))
    at = at % (len(text) + 1)
    _parse_or_error(text[:at] + insert + text[at + cut :])
