"""The static scan's rule table and the name tables it matches against.

:data:`RULES` is the contract: every finding carries one of these ids, ``--allow RULE``
takes them, and the README's table is :func:`rules_markdown`. The path tables map a
resolved name (``torch.utils._python_dispatch._disable_current_modes``,
``sys.modules``) to the rule it breaks; the scanner (:mod:`opbench.judge.scanner`)
resolves names in a file's AST and looks them up here (:func:`ref_rule`,
:func:`store_rule`, the name tables in capitals). Nothing here reads candidate code.
"""

from __future__ import annotations

import builtins
import re
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass

__all__ = [
    "ALLOWED",
    "ALLOWED_OPBENCH_MODULES",
    "BACKEND_QUERY",
    "BUILTIN_NAMES",
    "CORE_NAMESPACE",
    "DICT_MUTATORS",
    "EXECS",
    "FD_PATH",
    "FILE_METHODS",
    "FRAME_ATTRS",
    "IMPORTERS",
    "KEYED",
    "MAX_DEPTH",
    "OPENERS",
    "PROC_MEM",
    "REGISTRARS",
    "RULES",
    "TAMPERING",
    "THREAD_ENV",
    "WARNING",
    "Finding",
    "Rule",
    "ref_rule",
    "reroot",
    "rules_markdown",
    "store_rule",
]

TAMPERING = "tampering"
WARNING = "warning"
ALLOWED = "allowed"


@dataclass(frozen=True)
class Rule:
    """One row of the rule table; ``id`` is what ``--allow`` and reports name."""

    id: str
    severity: str
    title: str
    why: str


@dataclass(frozen=True)
class Finding:
    """One match: where, which rule, and what was matched (as resolved, with the text)."""

    rule: str
    severity: str
    file: str
    line: int
    col: int
    message: str

    def to_dict(self) -> dict:
        return asdict(self)


def _table(*rows: tuple[str, str, str, str]) -> dict[str, Rule]:
    return {r[0]: Rule(*r) for r in rows}


T, W = TAMPERING, WARNING
#: The rule table, in report order: tampering rules first.
RULES: dict[str, Rule] = _table(
    ("opbench-import", T, "import of or attribute access on an opbench module outside "
     "ALLOWED_OPBENCH_MODULES",
     "the guard, timing and correctness code live there; reaching them rewrites the verdict"),
    ("sys-modules", T, "sys.modules, sys.meta_path, sys.path_hooks (read or write)",
     "hands out every loaded module, the judge's included, without an import to see"),
    ("heap-walk", T, "the gc module (get_objects, get_referrers...), __subclasses__",
     "finds live objects the kernel was never given: reference outputs, the recorder"),
    ("frame-access", T, "sys._getframe, inspect frame functions, traceback.walk_stack, f_back, "
     "f_globals, f_locals, tb_frame, gi_frame, __globals__, __closure__, __code__ assignment",
     "the caller's frames and globals hold the worker's expected outputs and recorder state"),
    ("native-code", T, "ctypes, cffi, numpy.ctypeslib, opening /proc/<pid>/mem",
     "raw memory writes and C calls bypass every Python-level check"),
    ("fd-access", T, "raw descriptor I/O: os.write/read/dup/dup2/fdopen, open(<int>), /proc/*/fd/",
     "the worker reports to the harness over inherited descriptors: writes forge its report"),
    ("dispatch-disable", T, "torch._C._DisableTorchDispatch/_DisableTorchFunction*, dispatch key "
     "guards, _dispatch_tls_*, mode-stack push/pop/query, torch.utils._python_dispatch internals, "
     "torch.utils._mode_utils, torch._dispatch.python, private torch.overrides helpers, the "
     "profilers (torch.profiler, torch.autograd.profiler, torch._C._profiler)",
     "hides the kernel's ATen calls from the guard's recorders (the dispatch mode, the "
     "process-wide execution-trace observer), or detects them"),
    ("aten-override", T, "torch.library registrations in the aten/prims namespaces, "
     ".py_impl on torch.ops, torch._C._dispatch_library",
     "replaces the reference operator the candidate is compared with"),
    ("module-patch", T, "assignment, augmented assignment, del, setattr/delattr on attributes of "
     "torch (Tensor, nn.functional, testing...), numpy, triton, opbench, the standard library, "
     "or type(x)/x.__class__",
     "the judge compares with torch.equal/allclose/Tensor.__eq__ and times with time.*"),
    ("builtins-patch", T, "writes to builtins (builtins.x = ..., __builtins__['x'] = ...)",
     "every module, the judge's included, looks names up there"),
    ("dispatch-override", T, "assigning __torch_dispatch__/__torch_function__ on a class the file "
     "does not define", "reroutes every tensor operation of that class through the kernel"),
    ("global-state", T, "torch.backends.* writes or flag calls, set_float32_matmul_precision, "
     "thread counts (set_num_threads, OMP_/MKL_... environment), use_deterministic_algorithms, "
     "set_default_dtype/device, torch._C._set_*, CPU affinity",
     "the same worker runs and times the reference: it would be slowed down or changed"),
    ("reseed", T, "torch/cuda manual_seed, seed, set_rng_state, numpy.random.seed, random.seed",
     "reseeding changes the generators the judge draws inputs from"),
    ("signal-handler", T, "signal.signal, setitimer, alarm, pthread_kill, faulthandler timers",
     "a handler or timer interrupts the judge mid-measurement or kills the worker"),
    ("process-control", T, "os.kill, os.fork, os._exit, os.abort, os.exec*, sys.exit, exit(), "
     "raise SystemExit/KeyboardInterrupt", "ends or forks the worker to hide a failure"),
    ("trace-hook", T, "sys.settrace/setprofile, threading.settrace/setprofile, sys.monitoring, "
     "sys.addaudithook, assignment to f_trace", "runs kernel code inside every judge call"),
    ("dynamic-code", T, "exec/eval/compile of a computed string, types.CodeType/FunctionType, "
     "runpy",
     "hides code from this scan (constant strings are scanned as code)"),
    ("deserialize", T, "marshal/pickle/dill/cloudpickle loads, numpy.load(allow_pickle=True), "
     "torch.load(weights_only=False)", "unpickling runs code hidden in data"),
    ("unscannable", T, "source nested too deeply for the parser to build a tree",
     "code the scan cannot read is treated as hiding something"),
    ("threads", W, "threading, _thread, concurrent, multiprocessing, asyncio, subprocess, "
     "os.system/popen/spawn*", "work that outlives the call escapes timing and the guard"),
    ("file-access", W, "open, os file operations, shutil, tempfile, pathlib read/write methods, "
     "numpy/torch load/save (path arithmetic is not flagged)",
     "precomputed answers, or writes into the run directory"),
    ("network", W, "socket, ssl, urllib, http, requests, httpx, aiohttp ...",
     "answers fetched from elsewhere"),
    ("inspect", W, "the inspect module (its frame functions are frame-access)",
     "introspection is the usual road to frames and judge objects"),
    ("dynamic-import", W, "__import__/importlib.import_module of a computed name, "
     "importlib.util/machinery/reload", "hides what is imported"),
    ("sleep", W, "time.sleep, torch.cuda._sleep", "stalls distort timing"),
    ("torch-internal", W, "other uses of torch._C", "private bindings; worth a look"),
    ("torch-compiler", W, "torch.compile, torch._dynamo, torch._inductor, torch._export "
     "(their config writes included)",
     "delegates the work to PyTorch's compiler, whose kernels the recorder does not see"),
    ("device-select", W, "torch.cuda.set_device/set_stream, torch._C._cuda_setDevice/_setStream",
     "changes the current device or stream for the judge's later work"),
    ("env-write", W, "os.environ writes of other variables (TRITON_*, ...)",
     "changes the environment of the whole worker"),
    ("native-extension", W, "torch.utils.cpp_extension, torch.ops.load_library",
     "compiled C++/CUDA code is outside this scan's view"),
    ("syntax-error", W, "the file does not parse", "the import fails and is reported anyway"),
    ("unreadable", W, "the file could not be read or decoded", "nothing was scanned"),
)  # fmt: skip
del T, W

#: opbench modules a kernel may import: the reference Triton backend's shared helpers
#: (each entry also admits its submodules, by prefix ``entry + "."``).
ALLOWED_OPBENCH_MODULES: frozenset[str] = frozenset({"opbench.kernels"})


def _matcher(patterns: Iterable[str]) -> re.Pattern[str]:
    """``a.b`` matches ``a.b`` and below; ``a.b*`` any path starting so; ``~rx`` a regex."""
    parts = []
    for p in patterns:
        if p.startswith("~"):
            parts.append(p[1:])
        else:
            parts.append(re.escape(p[:-1]) if p.endswith("*") else re.escape(p) + r"(\.|$)")
    return re.compile("|".join(f"(?:{x})" for x in parts))


_TORCH_C_DISPATCH = (
    r"torch\._C\.\w*(Disable(TorchDispatch|TorchFunction|FuncTorch|PythonDispatcher)"
    r"|Enable(PythonDispatcher|TorchFunction|PreDispatch)|DispatchKeyGuard|AutoDispatchBelow"
    r"|PythonTLSSnapshot|TorchDispatchModeKey|_dispatch_tls_|dispatch_mode|_dispatch_stack"
    r"|_function_stack|torch_function_(state|mode|enabled|all_disabled)|disabled_torch"
    r"|skip_(next|one_hop)_torch_function|_in_tls)"
)
_PY_DISPATCH_PUBLIC = (
    r"(TorchDispatchMode|BaseTorchDispatchMode|TraceableWrapperSubclass|transform_subclass"
    r"|is_traceable_wrapper_subclass(_type)?|return_and_correct_aliasing)(\.|$)"
)
#: ``rule: patterns`` in priority order: the first rule with a matching pattern names the
#: rule of a referenced (imported, used or called) path. Indented lines continue a rule.
_REF_TABLE = rf"""
sys-modules: sys.modules sys.meta_path sys.path_hooks sys.path_importer_cache
heap-walk: gc objgraph pympler guppy
frame-access: sys._getframe* sys._current_frames traceback.walk_stack traceback.walk_tb
  inspect.currentframe inspect.stack inspect.trace inspect.getouterframes inspect.getinnerframes
  inspect.getframeinfo inspect.getargvalues inspect.getgeneratorlocals inspect.getclosurevars
  inspect.getcoroutinelocals
native-code: ctypes _ctypes cffi numpy.ctypeslib
fd-access: os.write os.read os.dup os.dup2 os.fdopen os.pwrite os.writev os.sendfile os.splice
aten-override: torch._C._dispatch_library
dispatch-disable: ~{_TORCH_C_DISPATCH} ~torch\.utils\._python_dispatch\.(?!{_PY_DISPATCH_PUBLIC})
  torch.utils._mode_utils torch._dispatch.python torch.overrides._*
  torch.overrides.enable_reentrant_dispatch torch._C._profiler torch.profiler
  torch.autograd.profiler torch.autograd.profiler_util torch.autograd._profiler_enabled
trace-hook: sys.settrace sys.setprofile sys.monitoring sys.addaudithook sys.call_tracing
  threading.settrace* threading.setprofile*
signal-handler: ~_?signal\.(signal|setitimer|alarm|pthread_|siginterrupt|set_wakeup_fd|raise_signal)
  faulthandler.dump_traceback_later faulthandler.register
process-control: os.kill os.killpg os.fork os.forkpty os._exit os.abort os.exec* sys.exit
  sys.remote_exec builtins.exit builtins.quit
dynamic-code: runpy codeop code.interact code.Interactive*
deserialize: marshal.load marshal.loads pickle.load pickle.loads pickle.Unpickler _pickle dill
  cloudpickle shelve joblib.load
global-state: torch.set_float32_matmul_precision torch.set_num_threads torch.set_num_interop_threads
  torch.use_deterministic_algorithms torch.set_deterministic_debug_mode torch.set_default_dtype
  torch.set_default_device torch.set_default_tensor_type torch.set_flush_denormal
  torch.cuda.set_per_process_memory_fraction torch.cuda.memory.set_per_process_memory_fraction
  torch.cuda.set_sync_debug_mode torch.cuda.memory._set_allocator_settings
  torch.cuda.memory.change_current_allocator torch._C._set_* sys.setswitchinterval
  os.sched_setaffinity os.nice os.setpriority threadpoolctl resource.setrlimit resource.prlimit
reseed: ~(torch|numpy)(\.\w+)*\.(manual_seed(_all)?|seed(_all)?|set_rng_state(_all)?|set_state)$
  random.seed random.setstate
threads: threading _thread concurrent multiprocessing asyncio subprocess _posixsubprocess pty
  torch.multiprocessing os.system os.popen os.spawn* os.posix_spawn* os.startfile
file-access: builtins.open io.open io.FileIO shutil tempfile glob mmap fileinput gzip bz2 lzma
  zipfile tarfile sqlite3 dbm torch.load torch.save torch.from_file os.open os.remove os.unlink
  os.rename os.renames os.replace os.rmdir os.removedirs os.mkdir os.makedirs os.listdir
  os.scandir os.walk os.chmod os.chown os.truncate os.link os.symlink os.utime os.chdir
  os.mkfifo os.mknod numpy.load numpy.save numpy.savez
  numpy.savez_compressed numpy.savetxt numpy.loadtxt numpy.fromfile numpy.genfromtxt numpy.memmap
network: socket _socket ssl urllib urllib3 http requests httpx aiohttp ftplib smtplib poplib
  imaplib telnetlib xmlrpc socketserver websocket websockets paramiko
inspect: inspect
dynamic-import: importlib.util importlib.machinery importlib.reload importlib.abc
  importlib._bootstrap* zipimport
sleep: time.sleep torch.cuda._sleep
torch-compiler: torch.compile torch._dynamo torch._inductor torch._export
device-select: torch.cuda.set_device torch.cuda.set_stream torch.cuda._set_stream_by_id
  torch._C._cuda_setDevice torch._C._cuda_setStream torch.accelerator.set_device_index
  torch.accelerator.set_stream
native-extension: torch.utils.cpp_extension torch.ops.load_library torch.classes.load_library
torch-internal: torch._C
"""


def _parse_table(text: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    rows: list[tuple[str, list[str]]] = []
    for line in text.strip().splitlines():
        if line.startswith(" "):
            rows[-1][1].extend(line.split())
        else:
            rule, _, patterns = line.partition(":")
            assert rule in RULES, rule
            rows.append((rule, patterns.split()))
    return tuple((rule, _matcher(patterns)) for rule, patterns in rows)


_REF_RULES = _parse_table(_REF_TABLE)

#: Roots whose attributes a kernel must never assign: whatever the judge's process shares.
_PATCH_ROOTS = frozenset(sys.stdlib_module_names) | {"torch", "numpy", "triton", "opbench"}
#: A path segment naming one of these modules is that module (``torch.sys`` is ``sys``).
_REROOT = frozenset(
    "sys gc os ctypes builtins inspect importlib marshal pickle subprocess socket threading "
    "_thread opbench torch".split()
)
BUILTIN_NAMES = frozenset(n for n in dir(builtins) if not n.startswith("__")) | {"__import__"}
IMPORTERS = frozenset({"builtins.__import__", "importlib.import_module", "importlib.__import__"})
EXECS = frozenset({"builtins.exec", "builtins.eval", "builtins.compile"})
FRAME_ATTRS = frozenset(
    "f_back f_globals f_locals f_builtins tb_frame gi_frame cr_frame ag_frame __globals__ "
    "__closure__".split()
)
DICT_MUTATORS = frozenset("__setitem__ __delitem__ update setdefault pop popitem clear".split())
KEYED = frozenset({"__setitem__", "__delitem__", "setdefault", "pop"})
REGISTRARS = frozenset(
    "Library _scoped_library impl define custom_op triton_op register_kernel register_fake "
    "register_autograd impl_abstract register_torch_dispatch register_vmap fallback".split()
)
CORE_NAMESPACE = re.compile(r"(aten|prims?)(::|$)")
FILE_METHODS = frozenset(
    "read_text write_text read_bytes write_bytes unlink touch rmdir mkdir iterdir rglob "
    "symlink_to hardlink_to tofile open".split()
)
OPENERS = frozenset(
    "builtins.open io.open io.FileIO os.open pathlib.Path pathlib.PosixPath".split()
)
PROC_MEM = re.compile(r"/proc/.+/mem$|/dev/k?mem$")
FD_PATH = re.compile(r"/proc/.+/fd/|/dev/fd/|/dev/std(in|out|err)")
BACKEND_QUERY = re.compile(r"(is_|get_|can_|version$)|.*(_enabled|_available)$")
THREAD_ENV = re.compile(
    r"(OMP_|MKL_|OPENBLAS_|GOTO_|NUMEXPR_|VECLIB_|BLIS_|KMP_|TORCH|PYTORCH|CUDA|CUBLAS|CUDNN"
    r"|NCCL|NVIDIA|OPBENCH|PYTHON|LD_)"
)
_COMPILER_CONFIG = _matcher(["torch._dynamo.config", "torch._inductor.config"])
MAX_DEPTH = 200


def _opbench_forbidden(path: str) -> bool:
    if path.split(".")[0] != "opbench":
        return False
    return not any(path == m or path.startswith(m + ".") for m in ALLOWED_OPBENCH_MODULES)


def ref_rule(path: str) -> str | None:
    """The rule of a reference to (an import, use or call of) ``path``."""
    if _opbench_forbidden(path):
        return "opbench-import"
    return next((rule for rule, rx in _REF_RULES if rx.match(path)), None)


def store_rule(path: str) -> str | None:
    """The rule of an assignment to (or deletion of) the attribute ``path``."""
    root = path.split(".")[0]
    if _opbench_forbidden(path):
        return "opbench-import"
    if root == "builtins":
        return "builtins-patch"
    if _COMPILER_CONFIG.match(path):
        return "torch-compiler"
    if path.startswith(("torch.backends.", "os.environ")):
        return "global-state"
    if ref_rule(path) == "sys-modules":
        return "sys-modules"
    return "module-patch" if root in _PATCH_ROOTS else None


def reroot(path: str) -> str:
    parts = path.split(".")
    if parts[0] in ("posix", "nt"):
        parts[0] = "os"
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] in _REROOT:
            return ".".join(parts[i:])
    return ".".join(parts)


def rules_markdown() -> str:
    """The rule table as markdown, for the README."""
    rows = ["| rule | severity | matches | why |", "| --- | --- | --- | --- |"]
    rows += [f"| `{r.id}` | {r.severity} | {r.title} | {r.why} |" for r in RULES.values()]
    return "\n".join(rows)
