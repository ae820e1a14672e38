"""What reading a worker's answer costs the harness: the answers of a real run, read as
the protocol reads them now (tensors through ``torch.load(weights_only=True)``, the rest
one JSON string, :mod:`opbench.run.protocol`) and as the whole message through
``weights_only`` (the format before 2026-11-28). The harness reads every answer on a slot
thread holding its interpreter's lock, so this is time no other slot can plan or judge in.

The Ray actor's relay is timed too: it read each answer and wrote it again before it
passed it on (until 2026-11-28); now it passes the worker's bytes on unread.

Usage: python benchmarks/probes/answer_decode.py [--ops add,mul,...] [--out FILE.md]
    [--traces ../shared/traces --limit-per-op 1]
(runs ``opbench run --suite opinfo --dtypes f32 --ops ... --no-perf``, or the traces
suite, in this process with the decoder wrapped to keep each answer's bytes, then times
both readings.)
"""

from __future__ import annotations

import argparse
import io
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

OPS = "add,mul,sum,mm,softmax,sin,exp,where,index_select,cat,clamp,div,max,sort,cumsum,var_mean,topk,addmm"


def _answers(ops: str, traces: str | None, limit_per_op: int) -> list[bytes]:
    from opbench.cli import main as cli
    from opbench.run import protocol

    kept: list[bytes] = []
    real = protocol.decode_plain

    def keep(data):  # noqa: ANN001, ANN202
        kept.append(bytes(data))
        return real(data)

    protocol.decode_plain = keep
    with tempfile.TemporaryDirectory() as out:
        suite = ["--suite", "opinfo", "--dtypes", "f32"] if not traces else [
            "--suite", "traces", "--traces", traces, "--limit-per-op", str(limit_per_op)]  # fmt: skip
        argv = ["opbench", "run", *suite, "--ops", ops, "--no-perf", "--workers", "1",
                "--out", f"{out}/run"]  # fmt: skip
        sys.argv = argv
        try:
            cli()
        except SystemExit as e:
            if e.code not in (0, None):
                raise SystemExit(f"the run failed (exit {e.code})") from None
        finally:
            protocol.decode_plain = real
    return kept


def _per_answer_ms(read, blobs: list[bytes], repeats: int = 3) -> float:  # noqa: ANN001
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for b in blobs:
            read(b)
        best = min(best, (time.perf_counter() - t0) / len(blobs) * 1e3)
    return best


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default=OPS)
    p.add_argument("--traces", default=None, help="the traces suite instead of OpInfo")
    p.add_argument("--limit-per-op", type=int, default=1)
    p.add_argument("--out", default=None)
    ns = p.parse_args()
    import torch

    from opbench.run import protocol

    blobs = [b for b in _answers(ns.ops, ns.traces, ns.limit_per_op) if b]
    messages = [protocol.decode_plain(b) for b in blobs]
    whole = []
    for m in messages:  # the same answers as the earlier format wrote them
        buf = io.BytesIO()
        torch.save(protocol.to_plain(m), buf)
        whole.append(buf.getvalue())

    def read_whole(b: bytes) -> object:
        return torch.load(io.BytesIO(b), weights_only=True, map_location="cpu")

    now = _per_answer_ms(protocol.decode_plain, blobs)
    before = _per_answer_ms(read_whole, whole)
    relay_before = _per_answer_ms(lambda b: protocol.encode_plain(protocol.decode_plain(b)), blobs)
    what = (f"traces suite (`--traces {ns.traces} --limit-per-op {ns.limit_per_op}`)"
            if ns.traces else "OpInfo quick profile, f32")  # fmt: skip
    lines = [
        "# Reading a worker's answer in the harness",
        "",
        f"{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, "
        f"{torch.__version__}, Python {platform.python_version()}; {len(blobs)} answers "
        f"of a CPU run ({what}, `--ops {ns.ops}`), median size "
        f"{statistics.median(map(len, blobs)) / 1e3:.1f} KB. Best of 3 passes.",
        "",
        "| reading | ms an answer |",
        "| --- | --- |",
        f"| tensors by `weights_only`, the rest as one JSON string (now) | {now:.3f} |",
        f"| the whole message by `weights_only` (before) | {before:.3f} |",
        f"| the Ray actor's relay before: reading and writing it again (in today's format) | {relay_before:.3f} |",
        "| the Ray actor's relay now: the bytes passed on | 0 |",
        "",
        "`python benchmarks/probes/answer_decode.py"
        + (f" --ops {ns.ops}" if ns.ops != OPS else "")
        + (f" --traces {ns.traces} --limit-per-op {ns.limit_per_op}" if ns.traces else "")
        + "`",
    ]
    text = "\n".join(lines) + "\n"
    if ns.out:
        Path(ns.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
