"""Where a profiled process spent its active time: a ``py-spy record -f raw --threads``
file summed by thread kind and by function (each function counted once per sample, so a
caller holds its callees' time). A file recorded with ``--subprocesses`` is summed by
process as well: ``harness`` (the process py-spy started) and each kind of process under
it (``worker``, named by the command that started it), thread kinds prefixed with it.

Usage: python benchmarks/probes/pyspy_summary.py harness4.raw --rate 25 \\
    [--functions plan_trials,_draw_float,cpu_copy] [--out summary.json]
Without ``--functions`` it prints the 40 costliest.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from collections.abc import Iterator


def _process_role(processes: list[str]) -> str:
    """``process 12:"python -m opbench.cli run ..."`` frames, outermost first, as a role:
    empty without ``--subprocesses``, ``harness`` for the first, else the innermost
    process's program (``python -m MODULE`` as MODULE, ``python -c`` as ``python -c``)."""
    if not processes:
        return ""
    if len(processes) == 1:
        return "harness"
    command = processes[-1].split(":", 1)[-1].strip('"').split()
    if "-m" in command[:-1]:
        return command[command.index("-m") + 1]
    if "-c" in command:
        return "python -c"
    return command[0].rsplit("/", 1)[-1] if command else "?"


def _records(path: str) -> Iterator[tuple[int, str]]:
    """The file's samples with the line each starts on. A process started with a
    multi-line ``python -c`` program (Triton's driver probe) has newlines in its name,
    so a record runs on until a line ends in `` COUNT`` and its next line starts a new
    stack (``process``/``thread``)."""
    buf: list[str] = []
    start = 1
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not buf:
                start = n
            buf.append(line)
            if re.search(r" \d+$", line):
                yield start, "\n".join(buf)
                buf = []
    if buf:
        yield start, "\n".join(buf)


def summarize(path: str, rate: float, functions: list[str] | None) -> dict:
    by_function: collections.Counter[str] = collections.Counter()
    by_thread: collections.Counter[str] = collections.Counter()
    by_process: collections.Counter[str] = collections.Counter()
    by_role_function: collections.defaultdict[str, collections.Counter[str]] = (
        collections.defaultdict(collections.Counter)
    )
    samples = 0
    for n, line in _records(path):
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            raise SystemExit(f"{path}:{n}: not a py-spy raw line (stack;stack COUNT)")
        processes = []  # a process's name is its command line, which may hold ';'
        while m := re.match(r'process \d+:".*?"(;|$)', stack, re.S):
            processes.append(m.group(0).rstrip(";"))
            stack = stack[m.end() :]
        frames = stack.split(";")
        samples += int(count)
        if not frames[0]:
            continue  # a process sampled between threads: no stack to count
        role = _process_role(processes)
        if role:
            by_process[role] += int(count)
        # "thread (123): opbench-plan_0" -> "opbench-plan"
        name = frames[0].split(":", 1)[-1].strip()
        kind = re.sub(r"[_\d]+$|-\d+ \(.*$", "", name)
        by_thread[f"{role}/{kind}" if role else kind] += int(count)
        for fn in {fr.split(" (")[0] for fr in frames[1:]}:
            by_function[fn] += int(count)
            if role:
                by_role_function[role][fn] += int(count)
    wanted = functions or [fn for fn, _ in by_function.most_common(40)]
    per_process = {
        role: {
            fn: round(counts[fn] / rate, 1)
            for fn in functions or [fn for fn, _ in counts.most_common(30)]
        }
        for role, counts in by_role_function.items()
    }
    return {
        "file": path,
        "samples_per_s": rate,
        "active_s_total": round(samples / rate, 1),
        "active_s_by_process_kind": {p: round(c / rate, 1) for p, c in by_process.most_common()},
        "active_s_by_thread_kind": {t: round(c / rate, 1) for t, c in by_thread.most_common(12)},
        "active_s_in": {fn: round(by_function[fn] / rate, 1) for fn in wanted},
        **({"active_s_in_by_process_kind": per_process} if per_process else {}),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("raw")
    p.add_argument("--rate", type=float, default=100.0, help="py-spy's -r")
    p.add_argument("--functions", default=None, help="comma-separated names to report")
    p.add_argument("--out", default=None)
    ns = p.parse_args()
    fns = ns.functions.split(",") if ns.functions else None
    result = summarize(ns.raw, ns.rate, fns)
    text = json.dumps(result, indent=1)
    if ns.out:
        with open(ns.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
