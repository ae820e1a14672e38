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
