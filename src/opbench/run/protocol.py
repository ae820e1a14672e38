"""Framed messages between the harness and a worker over pipes.

Harness -> worker messages are pickles (the harness is trusted). Worker -> harness
messages are read with ``torch.load(weights_only=True)``: the worker runs untrusted
kernels, and a crafted pickle from it must not be able to run code in the harness.
So everything a worker sends is plain data: dicts, lists, tuples, str, numbers,
None, and tensors.

A message travels as its tensors, in a list ``torch.save`` writes, beside the rest as one
JSON string (:func:`_skeleton`): ``weights_only`` unpickles in Python, an opcode at a time,
and a test's answer holds some 400 small objects around its 4 tensors; read whole that way
it cost 3.4 ms an answer on the CPU and 3.7 ms on an H200 host, the harness's largest
share of its interpreter while tests ran (``results/harness-profile-opinfo-h200.md``).
JSON is parsed in C and builds nothing but data.
"""

from __future__ import annotations

import dataclasses
import io
import json
import pickle
import struct
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:  # torch is imported where a tensor is handled: a Ray actor that only
    import torch  # relays a worker's bytes starts without it (seconds where Python
    # compiles from source)

_HEADER = struct.Struct("!Q")
MAX_MESSAGE_BYTES = 8 << 30


class ProtocolError(RuntimeError):
    """A message that could not be read (truncated, oversized or not plain data)."""


def to_plain(obj: Any) -> Any:
    """Reduce dataclasses and unknown objects to plain data that ``weights_only`` loads."""
    import torch

    return _plain(obj, torch)


def _plain(obj: Any, torch: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name), torch) for f in dataclasses.fields(obj)}
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        if type(t) is not torch.Tensor:
            t = t.as_subclass(torch.Tensor)
        return t
    if isinstance(obj, dict):
        return {
            str(k) if not isinstance(k, (int, str)) else k: _plain(v, torch) for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        seq = [_plain(v, torch) for v in obj]
        return seq if isinstance(obj, list) else tuple(seq)
    if obj is None or isinstance(obj, (bool, int, float, str, complex)):
        return obj
    if isinstance(obj, (torch.dtype, torch.device)):
        return str(obj)
    return repr(obj)


def write_trusted(stream: BinaryIO, obj: Any) -> None:
    """Harness -> worker."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_trusted(stream: BinaryIO) -> Any:
    """Worker side: read a harness message (``EOFError`` when the harness is gone)."""
    return pickle.loads(_read_frame(stream))


#: The JSON skeleton's markers, each a dict of one key: a tensor (its index in the
#: message's tensor list), a tuple, a complex number, a dict whose keys JSON cannot keep
#: (ints, or a key that looks like a marker) as ``[key, value]`` pairs.
_TENSOR, _TUPLE, _COMPLEX, _PAIRS = "__t__", "__tuple__", "__complex__", "__pairs__"
_MARKERS = frozenset((_TENSOR, _TUPLE, _COMPLEX, _PAIRS))


def _skeleton(obj: Any, tensors: list[torch.Tensor], tensor_type: type) -> Any:
    """``obj`` (plain data, :func:`to_plain`) as JSON data, its tensors (of
    ``tensor_type``) moved to ``tensors`` and replaced by their index."""
    if isinstance(obj, tensor_type):
        tensors.append(obj)
        return {_TENSOR: len(tensors) - 1}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and not _MARKERS.intersection(obj):
            return {k: _skeleton(v, tensors, tensor_type) for k, v in obj.items()}
        return {_PAIRS: [[k, _skeleton(v, tensors, tensor_type)] for k, v in obj.items()]}
    if isinstance(obj, list):
        return [_skeleton(v, tensors, tensor_type) for v in obj]
    if isinstance(obj, tuple):
        return {_TUPLE: [_skeleton(v, tensors, tensor_type) for v in obj]}
    if isinstance(obj, complex):
        return {_COMPLEX: [obj.real, obj.imag]}
    return obj


def _rebuilt(skeleton: str, tensors: list[Any]) -> Any:
    """The message a :func:`_skeleton` string and its tensors stand for; anything that
    is not what :func:`_skeleton` writes is a :class:`ProtocolError`."""

    def marker(d: dict[str, Any]) -> Any:
        if len(d) != 1 or not _MARKERS.intersection(d):
            return d
        (key, value), = d.items()  # fmt: skip
        if key == _TENSOR:
            if type(value) is not int or not 0 <= value < len(tensors):
                raise ProtocolError(f"tensor reference {value!r} out of range")
            return tensors[value]
        if not isinstance(value, list):
            raise ProtocolError(f"malformed {key} in a worker message")
        if key == _TUPLE:
            return tuple(value)
        if key == _COMPLEX:
            return complex(*value)
        return {k: v for k, v in value}

    return json.loads(skeleton, object_hook=marker)


def _saved(obj: Any) -> io.BytesIO:
    import torch

    tensors: list[torch.Tensor] = []
    plain = _plain(obj, torch)
    skeleton = json.dumps(_skeleton(plain, tensors, torch.Tensor), separators=(",", ":"))
    buf = io.BytesIO()
    torch.save({"skeleton": skeleton, "tensors": tensors}, buf)
    return buf


def encode_plain(obj: Any) -> bytes:
    """Plain data as the bytes :func:`decode_plain` reads, for a relay that passes a
    worker's answer on (the Ray actor, :mod:`opbench.run.ray_node`). Pickle, Ray's own
    transport, cannot carry every tensor: a complex32 one unpickles with ``AttributeError:
    type object 'torch.storage.UntypedStorage' has no attribute 'dtype'`` (torch 2.11 and
    2.13), which lost an actor's 113 OpInfo tests on 4 x H100, 2026-11-27."""
    return _saved(obj).getvalue()


def write_plain(stream: BinaryIO, obj: Any) -> None:
    """Worker -> harness: plain data through ``torch.save``."""
    data = _saved(obj).getbuffer()  # no copy: a program's outputs can be gigabytes
    _write_all(stream, _HEADER.pack(len(data)))
    _write_all(stream, data)
    stream.flush()


def _write_all(stream: BinaryIO, data: Any) -> None:
    """Write every byte: a raw pipe's ``write`` may take fewer than it was given (Linux
    moves at most 2,147,479,552 bytes per call), and a message cut short reads as a
    worker that exited mid-answer (a 1 GiB-output program problem crashed so)."""
    view = memoryview(data).cast("B")
    while view:
        n = stream.write(view)
        if n is None:  # a non-blocking stream that took nothing: wait for the reader
            import select

            select.select([], [stream], [])
            continue
        view = view[n:]


def decode_plain(data: bytes) -> Any:
    """Harness side: load a worker message without executing anything from it."""
    import torch

    try:
        saved = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
        if not (
            isinstance(saved, dict)
            and isinstance(saved.get("skeleton"), str)
            and isinstance(saved.get("tensors"), list)
            and all(isinstance(t, torch.Tensor) for t in saved["tensors"])
        ):
            raise ProtocolError("not a message: a skeleton and a list of tensors")
        return _rebuilt(saved["skeleton"], saved["tensors"])
    except ProtocolError as e:
        raise ProtocolError(f"unreadable message from worker: {e}") from None
    except Exception as e:  # anything malformed is the worker's fault, never ours
        raise ProtocolError(f"unreadable message from worker: {type(e).__name__}: {e}") from None


def frame_length(header: bytes) -> int:
    (n,) = _HEADER.unpack(header)
    if n > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"worker message of {n} bytes exceeds the limit")
    return n


HEADER_SIZE = _HEADER.size


def _read_frame(stream: BinaryIO) -> bytes:
    header = _read_exact(stream, HEADER_SIZE)
    return _read_exact(stream, frame_length(header))


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            raise EOFError("pipe closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
