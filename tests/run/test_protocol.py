import io
import pickle

import pytest
import torch

from opbench.run import protocol


def test_plain_round_trip_keeps_tensors_and_structure():
    buf = io.BytesIO()
    obj = {"a": [torch.arange(3), (1, 2.5, None)], "b": "x", "dt": torch.float16}
    protocol.write_plain(buf, obj)
    data = buf.getvalue()[protocol.HEADER_SIZE :]
    back = protocol.decode_plain(data)
    assert torch.equal(back["a"][0], torch.arange(3))
    assert back["a"][1] == (1, 2.5, None) and back["dt"] == "torch.float16"


class Evil:
    def __reduce__(self):
        return (exec, ("import os; os.environ['OPBENCH_PWNED'] = '1'",))


def test_crafted_pickle_from_worker_is_rejected_not_executed(monkeypatch):
    monkeypatch.delenv("OPBENCH_PWNED", raising=False)
    import os

    data = pickle.dumps({"x": Evil()})
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_plain(data)
    assert "OPBENCH_PWNED" not in os.environ


def test_tensor_subclass_is_reduced_to_plain_tensor():
    class Sub(torch.Tensor):
        pass

    t = torch.ones(2).as_subclass(Sub)
    plain = protocol.to_plain({"t": t})
    assert type(plain["t"]) is torch.Tensor


class _ShortWriter:
    """A stream that takes at most ``limit`` bytes per write, as a raw pipe may."""

    def __init__(self, limit: int) -> None:
        self.limit, self.data = limit, bytearray()

    def write(self, b) -> int:  # noqa: ANN001
        chunk = bytes(memoryview(b)[: self.limit])
        self.data += chunk
        return len(chunk)

    def flush(self) -> None:
        pass


def test_a_message_is_written_whole_through_short_writes() -> None:
    """Linux writes at most ~2 GiB per call: a program's outputs were cut short and the
    harness saw a worker exiting mid-answer."""
    import torch

    from opbench.run import protocol

    t = torch.arange(100_000, dtype=torch.float32)
    w = _ShortWriter(4097)
    protocol.write_plain(w, {"outputs": [t], "n": 3})
    frame = bytes(w.data)
    n = protocol.frame_length(frame[: protocol.HEADER_SIZE])
    assert len(frame) == protocol.HEADER_SIZE + n
    got = protocol.decode_plain(frame[protocol.HEADER_SIZE :])
    assert torch.equal(got["outputs"][0], t) and got["n"] == 3


def _round_trip(obj):
    return protocol.decode_plain(protocol.encode_plain(obj))


def test_every_kind_of_plain_data_comes_back_as_it_was_sent():
    """The JSON skeleton keeps what JSON alone would lose: tuples, int and bool keys,
    keys that look like its own markers, complex numbers, NaN and infinities, -0.0."""
    base = torch.arange(12.0).reshape(3, 4)
    obj = {
        "tuple": (1, (2, [3, (4,)]), ()),
        "int_keys": {0: "a", 7: [1.5]},
        "bool_key": {True: 1},
        "marker_keys": {"__t__": 0, "__tuple__": [1], "__pairs__": {"__complex__": 2}},
        "floats": [float("nan"), float("inf"), -float("inf"), -0.0, 1e308, 5e-324],
        "complex": 1.5 - 2j,
        "empty": [{}, [], ""],
        "text": '{"__t__": 0} \u00e9 \ud800',
        "big": 2**80,
        "tensors": [base.t(), base[1:, ::2], torch.tensor([1 + 2j], dtype=torch.complex32)],
    }
    back = _round_trip(obj)
    assert back["tuple"] == (1, (2, [3, (4,)]), ())
    assert back["int_keys"] == {0: "a", 7: [1.5]} and back["bool_key"] == {True: 1}
    assert back["marker_keys"] == obj["marker_keys"]
    nan, *rest = back["floats"]
    assert nan != nan and rest == obj["floats"][1:] and str(rest[2]) == "-0.0"
    assert back["complex"] == 1.5 - 2j and back["empty"] == [{}, [], ""]
    assert back["text"] == obj["text"] and back["big"] == 2**80
    for sent, got in zip(obj["tensors"], back["tensors"]):
        assert got.dtype == sent.dtype and got.stride() == sent.stride()
        assert torch.equal(got.to(torch.complex64), sent.to(torch.complex64))
    t, sl = back["tensors"][:2]
    assert t.untyped_storage().data_ptr() == sl.untyped_storage().data_ptr()  # one storage


@pytest.mark.parametrize(
    "skeleton",
    ['{"__t__": 5}', '{"__t__": -1}', '{"__t__": "0"}', '{"__tuple__": 3}',
     '{"__pairs__": [[[1], 2]]}', '{"__complex__": ["1", 2]}', '[' * 100000],
)  # fmt: skip
def test_a_crafted_skeleton_is_an_unreadable_message(skeleton):
    buf = io.BytesIO()
    torch.save({"skeleton": skeleton, "tensors": [torch.zeros(1)]}, buf)
    with pytest.raises(protocol.ProtocolError):
        protocol.decode_plain(buf.getvalue())


@pytest.mark.parametrize("saved", [[1, 2], {"skeleton": 1, "tensors": []},
                                   {"skeleton": "1", "tensors": ["x"]}])  # fmt: skip
def test_a_message_not_in_the_skeleton_form_is_unreadable(saved):
    buf = io.BytesIO()
    torch.save(saved, buf)
    with pytest.raises(protocol.ProtocolError, match="skeleton"):
        protocol.decode_plain(buf.getvalue())
