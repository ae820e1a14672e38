"""The static scan's scanner: one file's AST walked, its names resolved, findings emitted.

Owns :class:`Scanner`: a first pass binds every name a file gives a module or attribute
(imports, aliases, assignments, loop targets, default arguments), a second visits every
node in source order, resolves each chain to the paths it can stand for and looks them
up in :mod:`opbench.judge.scan_rules`. Constant strings given to ``exec``/``eval``/
``compile`` are scanned as code by a child scanner; tampering inside a top-level
``if __name__ == "__main__":`` block is reported as a warning. It reads text with
:mod:`ast` only, never running it. The entry points and the account of what the scan
sees and misses are :mod:`opbench.judge.static_scan`'s.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from opbench.judge.scan_rules import (
    BACKEND_QUERY,
    BUILTIN_NAMES,
    CORE_NAMESPACE,
    DICT_MUTATORS,
    EXECS,
    FD_PATH,
    FILE_METHODS,
    FRAME_ATTRS,
    IMPORTERS,
    KEYED,
    MAX_DEPTH,
    OPENERS,
    PROC_MEM,
    REGISTRARS,
    RULES,
    TAMPERING,
    THREAD_ENV,
    WARNING,
    Finding,
    ref_rule,
    reroot,
    store_rule,
)
from opbench.spec import safe_ast

__all__ = ["Scanner"]


def _const_str(node: ast.AST | None, depth: int = 0) -> str | None:
    """A string known without running anything: constants, ``+`` of them, f-strings of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if depth < MAX_DEPTH and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _const_str(node.left, depth + 1), _const_str(node.right, depth + 1)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [_const_str(v, depth + 1) for v in node.values]
        return "".join(p for p in parts if p is not None) if None not in parts else None
    return None


def _literal_text(node: ast.AST) -> str:
    """Constant pieces of a string expression, placeholders as ``*`` (for path patterns)."""
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "*" for v in node.values)
    return _const_str(node) or ""


def _arg(call: ast.Call, pos: int | None, *names: str) -> ast.expr | None:
    """The argument at ``pos`` or passed by one of ``names`` (None: not statically there)."""
    if pos is not None and len(call.args) > pos:
        starred = any(isinstance(a, ast.Starred) for a in call.args[: pos + 1])
        return None if starred else call.args[pos]
    return next((k.value for k in call.keywords if k.arg in names), None)


def _falsy(node: ast.expr | None) -> bool:
    """Statically false (absent counts as false); a computed value is not."""
    if node is None:
        return True
    if isinstance(node, (ast.List, ast.Tuple)):
        return not node.elts
    return isinstance(node, ast.Constant) and not node.value


def _const_in(node: ast.expr, values: tuple[object, ...]) -> bool:
    return isinstance(node, ast.Constant) and any(node.value is v for v in values)


def _root_name(node: ast.AST) -> str | None:
    """The name a chain starts from (``a`` in ``getattr(a, "b").c[0]``), for de-duplication."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            node = node.args[0] if node.func.id == "getattr" else node.func
        else:
            return None


class Scanner:
    """One module: aliases first (file-wide), then every node in source order.

    ``inner`` holds nodes that are part of an enclosing chain or call, which is checked
    as a whole (``torch._C._DisableTorchDispatch`` is one finding, not one per prefix).
    ``flagged`` maps a name to the rules its binding already reported, so that
    ``import gc`` and the uses of ``gc`` below it give one finding.
    """

    def __init__(self, source: str, filename: str, parent: Scanner | None = None) -> None:
        self.source, self.filename = source, filename
        self.aliases: dict[str, list[str]] = (
            {k: list(v) for k, v in parent.aliases.items()} if parent else {}
        )
        self.local_names: set[str] = set(parent.local_names) if parent else set()
        self.local_classes: set[str] = set(parent.local_classes) if parent else set()
        self.flagged: dict[str, set[str]] = (
            {k: set(v) for k, v in parent.flagged.items()} if parent else {}
        )
        self.inner: set[int] = set()
        self.findings: list[Finding] = []

    def scan(self, tree: ast.AST) -> list[Finding]:
        self._collect(tree)
        stack = [tree]
        while stack:  # an explicit stack: deep but valid code cannot exhaust recursion
            node = stack.pop()
            visit = getattr(self, f"_visit_{type(node).__name__}", None)
            if visit is not None:
                visit(node)
            stack.extend(reversed(list(ast.iter_child_nodes(node))))
        main = _main_block_lines(tree)
        return [
            _in_main(f) if f.line in main and f.severity == TAMPERING else f for f in self.findings
        ]

    # -- pass 1: what names stand for -----------------------------------------------------
    def _bind(self, name: str, paths: Iterable[str]) -> None:
        known = self.aliases.setdefault(name, [])
        known.extend(p for p in paths if p not in known)

    def _collect(self, tree: ast.AST) -> None:
        assigns: list[tuple[ast.expr, ast.expr]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    top = a.name.split(".")[0]
                    self._bind(a.asname or top, [a.name if a.asname else top])
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if node.level or not node.module:
                        self.local_names.add(a.asname or a.name)
                    elif a.name != "*":
                        self._bind(a.asname or a.name, [f"{node.module}.{a.name}"])
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.local_names.add(node.name)
                if isinstance(node, ast.ClassDef):
                    self.local_classes.add(node.name)
            elif isinstance(node, ast.arg):
                self.local_names.add(node.arg)
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                self.local_names.add(node.id)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.local_names.add(node.name)
            elif isinstance(node, ast.Assign):
                assigns.extend((t, node.value) for t in node.targets)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                assigns.append((node.target, node.value))
            elif isinstance(node, (ast.For, ast.comprehension)):
                if isinstance(node.iter, (ast.List, ast.Tuple, ast.Set)):
                    assigns.extend((node.target, elt) for elt in node.iter.elts)
            elif isinstance(node, ast.arguments):  # def f(m=torch): m.equal = ...
                params = [*node.posonlyargs, *node.args]
                defaults = zip(params[len(params) - len(node.defaults) :], node.defaults)
                for param, default in [*defaults, *zip(node.kwonlyargs, node.kw_defaults)]:
                    if default is not None:
                        assigns.append((ast.Name(id=param.arg, ctx=ast.Store()), default))
        for _ in range(3):  # chains of aliases: a = torch; b = a.Tensor
            for target, value in assigns:
                for name, val in _pairs(target, value):
                    self._bind(name, self._resolve(val))

    def _resolve(self, node: ast.AST | None, depth: int = 0) -> list[str]:
        """Every dotted path ``node`` may stand for (usually one; none when unknown)."""
        attrs: list[str] = []
        while isinstance(node, ast.Attribute):  # iterative: chains may be long
            attrs.append(node.attr)
            node = node.value
        suffix = "".join(f".{a}" for a in reversed(attrs))
        if node is None or depth > MAX_DEPTH:
            return []
        return [reroot(p + suffix) for p in self._resolve_base(node, depth + 1)]

    def _resolve_base(self, node: ast.AST, depth: int) -> list[str]:
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            if node.id in self.local_names:
                return []
            if node.id == "__builtins__":
                return ["builtins"]
            return [f"builtins.{node.id}"] if node.id in BUILTIN_NAMES else []
        if isinstance(node, ast.NamedExpr):
            return self._resolve(node.value, depth)
        if isinstance(node, ast.Call):
            funcs = set(self._resolve(node.func, depth))
            first = _arg(node, 0, "name")
            if "builtins.getattr" in funcs and (name := _const_str(_arg(node, 1))):
                return [f"{p}.{name}" for p in self._resolve(first, depth)]
            if funcs & IMPORTERS:
                mod = _const_str(first)
                if not mod or mod.startswith("."):
                    return []
                fromlist = _arg(node, 3, "fromlist")
                whole = "importlib.import_module" in funcs or not _falsy(fromlist)
                return [mod if whole else mod.split(".")[0]]
            if "builtins.eval" in funcs and (src := _const_str(first)):
                try:
                    return self._resolve(safe_ast.parse(src.strip(), mode="eval").body, depth)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    return []
            if "builtins.vars" in funcs:
                return [f"{p}.__dict__" for p in self._resolve(_arg(node, 0), depth)]
            return ["<globals>"] if "builtins.globals" in funcs else []
        if isinstance(node, ast.Subscript) and (key := _const_str(node.slice)) is not None:
            out: list[str] = []
            for p in self._resolve(node.value, depth):
                if p.endswith(".__dict__"):
                    out.append(f"{p[: -len('.__dict__')]}.{key}")
                elif p in ("sys.modules", "builtins"):
                    out.append(key if p == "sys.modules" else f"builtins.{key}")
                elif p == "<globals>":
                    out.extend(self._resolve(ast.Name(id=key, ctx=ast.Load()), depth))
            return out
        return []

    # -- reporting ------------------------------------------------------------------------
    def _emit(self, rule: str, node: ast.AST, message: str) -> None:
        line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
        self.findings.append(Finding(rule, RULES[rule].severity, self.filename, line, col, message))

    def _text(self, node: ast.AST, limit: int = 60) -> str:
        text = " ".join((ast.get_source_segment(self.source, node) or "").split())
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def _check_ref(self, path: str, node: ast.AST, verb: str, root: str | None = None) -> None:
        rule = ref_rule(path)
        if rule is None or rule in self.flagged.get(root or "", ()):
            return
        text = self._text(
            node.func if isinstance(node, ast.Call) and verb == "calls" else node, 999
        )
        path = path.removeprefix("builtins.")
        shown = f" (as {text[:57]}...)" if len(text) > 60 else f" (as {text})"
        shown = shown if text and text != path and verb != "imports" else ""
        self._emit(rule, node, f"{verb} {path}{shown}")

    def _check_store(self, node: ast.AST, receiver: ast.expr, attr: str | None, verb: str) -> None:
        """An assignment, deletion or setattr of ``receiver.attr`` (attr None: computed)."""
        if attr in ("__torch_dispatch__", "__torch_function__"):
            name = receiver.id if isinstance(receiver, ast.Name) else None
            if name not in self.local_classes or name in self.aliases:
                self._emit("dispatch-override", node, f"{verb} {self._text(receiver)}.{attr}")
            return
        if attr is not None:
            self._check_attr_name(attr, node, store=True)
        for path in self._resolve(receiver):
            target = f"{path}.{attr or '<computed>'}"
            if rule := store_rule(target):
                self._emit(rule, node, f"{verb} {target}")
                return
        if (isinstance(receiver, ast.Attribute) and receiver.attr == "__class__") or (
            isinstance(receiver, ast.Call) and "builtins.type" in self._resolve(receiver.func)
        ):
            self._emit("module-patch", node, f"{verb} {self._text(receiver)}.{attr}")

    def _check_attr_name(self, attr: str, node: ast.AST, store: bool) -> None:
        if attr in FRAME_ATTRS or (store and attr == "__code__"):
            self._emit("frame-access", node, f"{'assigns' if store else 'uses'} .{attr}")
        elif attr == "__subclasses__":
            self._emit("heap-walk", node, "uses .__subclasses__")
        elif store and attr == "f_trace":
            self._emit("trace-hook", node, "assigns .f_trace")

    def _check_env(self, node: ast.AST, how: str, key: ast.expr | None) -> None:
        name = _const_str(key)
        if name is None:
            self._emit("global-state", node, f"{how} os.environ (a computed key, or all keys)")
        else:
            rule = "global-state" if THREAD_ENV.match(name) else "env-write"
            self._emit(rule, node, f"{how} os.environ[{name!r}]")

    # -- pass 2: visitors -----------------------------------------------------------------
    def _visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._import(a.name, a.asname or a.name.split(".")[0], node)

    def _visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return  # sibling helper files of the kernel folder
        for a in node.names:
            full = node.module if a.name == "*" else f"{node.module}.{a.name}"
            self._import(full, a.asname or a.name, node)

    def _import(self, path: str, bound: str, node: ast.AST) -> None:
        if rule := ref_rule(path):
            self._emit(rule, node, f"imports {path}")
            self.flagged.setdefault(bound, set()).add(rule)

    def _visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:  # an alias of a reported thing is not reported again
            for name, value in _pairs(target, node.value):
                rules = {r for p in self._resolve(value) if (r := ref_rule(p))}
                rules |= self.flagged.get(_root_name(value) or "", set())
                if rules:
                    self.flagged.setdefault(name, set()).update(rules)

    def _visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and id(node) not in self.inner:
            for path in self._resolve(node):
                self._check_ref(path, node, "uses", node.id)

    def _visit_Attribute(self, node: ast.Attribute) -> None:
        self.inner.add(id(node.value))
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            verb = "deletes" if isinstance(node.ctx, ast.Del) else "assigns"
            self._check_store(node, node.value, node.attr, verb)
            return
        self._check_attr_name(node.attr, node, store=False)
        if id(node) not in self.inner:
            for path in self._resolve(node):
                self._check_ref(path, node, "uses", _root_name(node))

    def _visit_Subscript(self, node: ast.Subscript) -> None:
        if not isinstance(node.ctx, (ast.Store, ast.Del)):
            return
        verb = "deletes" if isinstance(node.ctx, ast.Del) else "writes"
        containers = self._resolve(node.value)
        if "os.environ" in containers:
            self._check_env(node, verb, node.slice)
        elif "sys.modules" not in containers:  # that one is reported as a use
            for path in self._resolve(node) or [f"{c}.<computed>" for c in containers]:
                if rule := store_rule(path):
                    self._emit(rule, node, f"{verb} {path}")
                    return

    def _visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        for path in self._resolve(exc):
            if path in ("builtins.SystemExit", "builtins.KeyboardInterrupt"):
                self._emit("process-control", node, f"raises {path.split('.')[1]}")

    def _visit_Call(self, node: ast.Call) -> None:
        self.inner.add(id(node.func))
        if isinstance(node.func, ast.Attribute):
            self._check_method(node, node.func)
        for path in self._resolve(node.func):
            self._check_call(node, path)

    def _check_call(self, node: ast.Call, path: str) -> None:
        fname = path.rsplit(".", 1)[-1]
        if path in EXECS:
            self._check_exec(node, fname)
        elif path in IMPORTERS:
            mod = _const_str(_arg(node, 0, "name"))
            if mod is None:
                self._emit("dynamic-import", node, f"{fname}() of a computed name")
            elif not mod.startswith("."):
                self._check_ref(mod, node, "imports")
        elif path in ("builtins.setattr", "builtins.delattr") and node.args:
            name = _const_str(_arg(node, 1))
            self._check_store(node, node.args[0], name, f"{fname} on")
        elif path == "builtins.getattr":
            if (name := _const_str(_arg(node, 1))) and node.args:
                self._check_attr_name(name, node, store=False)
                self.inner.add(id(node.args[0]))  # checked below, as the whole path
            if id(node) not in self.inner:
                for target in self._resolve(node):
                    self._check_ref(target, node, "uses", _root_name(node))
        elif path.startswith("os.environ.") and fname in DICT_MUTATORS:
            self._env_call(node, fname)
        elif path in ("os.putenv", "os.unsetenv"):
            self._check_env(node, f"calls os.{fname}() on", _arg(node, 0, "key"))
        elif found := self._call_rule(node, path, fname):
            self._emit(found[0], node, found[1])
        else:
            self._check_ref(path, node, "calls", _root_name(node.func))

    def _call_rule(self, node: ast.Call, path: str, fname: str) -> tuple[str, str] | None:
        """Rules that depend on the call's arguments, not only on what is called."""
        if path.startswith("torch.backends.") and not (
            BACKEND_QUERY.match(fname) or (fname.startswith("preferred_") and not node.args)
        ):
            return "global-state", f"calls {path}"
        if path.startswith("torch.library.") and fname in REGISTRARS:
            op = _arg(node, 0, "ns", "qualname", "op", "name")
            if op is None:
                return None
            name, targets = _const_str(op), self._resolve(op)
            core = any(t.startswith(("torch.ops.aten", "torch.ops.prims")) for t in targets)
            if (name is not None and CORE_NAMESPACE.match(name)) or core:
                return "aten-override", f"calls {path} on {self._text(op)}"
            if name is None and not targets:
                return "aten-override", f"calls {path} with a computed namespace"
        if path == "numpy.load" and not _falsy(_arg(node, 2, "allow_pickle")):
            return "deserialize", "calls numpy.load(allow_pickle=True)"
        weights = _arg(node, None, "weights_only")
        if path == "torch.load" and weights is not None and not _const_in(weights, (True, None)):
            return "deserialize", "calls torch.load(weights_only=False)"
        if path in ("types.CodeType", "types.FunctionType", "types.LambdaType"):
            return "dynamic-code", f"calls {path}"
        target = node.args[0] if path in OPENERS and node.args else None
        if isinstance(target, ast.Constant) and type(target.value) is int:
            return "fd-access", f"calls {path.removeprefix('builtins.')}({target.value})"
        if target is not None and PROC_MEM.search(_literal_text(target)):
            return "native-code", f"opens {_literal_text(target)}"
        if target is not None and FD_PATH.search(_literal_text(target)):
            return "fd-access", f"opens {_literal_text(target)}"
        return None

    def _env_call(self, node: ast.Call, method: str) -> None:
        arg = _arg(node, 0, "key")
        if method == "update" and isinstance(arg, ast.Dict) and None not in arg.keys:
            for key in arg.keys:
                self._check_env(node, "calls update() on", key)
        else:
            self._check_env(node, f"calls {method}() on", arg if method in KEYED else None)

    def _check_method(self, node: ast.Call, func: ast.Attribute) -> None:
        """Checks by method name, whatever the receiver resolves to."""
        receivers = self._resolve(func.value)
        if func.attr in ("__setattr__", "__delattr__"):
            verb = "setattr on" if func.attr == "__setattr__" else "delattr on"
            if {"builtins.object", "builtins.type"} & set(receivers) and node.args:
                self._check_store(node, node.args[0], _const_str(_arg(node, 1)), verb)
            else:
                self._check_store(node, func.value, _const_str(_arg(node, 0)), verb)
        elif func.attr in DICT_MUTATORS:
            key = _const_str(_arg(node, 0)) if func.attr in KEYED else None
            for p in receivers:
                target = f"{p[: -len('.__dict__')]}.{key or '<computed>'}"
                if p.endswith(".__dict__") and (rule := store_rule(target)):
                    self._emit(rule, node, f"{func.attr}() on {target}")
                    return
        elif func.attr == "py_impl" and any(p.startswith("torch.ops.") for p in receivers):
            self._emit("aten-override", node, f"calls {self._text(func)}")
        elif func.attr in REGISTRARS and not any(p.startswith("torch.") for p in receivers):
            name = _const_str(_arg(node, 0))
            if name and "::" in name and CORE_NAMESPACE.match(name):
                self._emit("aten-override", node, f"calls .{func.attr}({name!r})")
        elif func.attr in FILE_METHODS and all(p.startswith("pathlib.") for p in receivers):
            self._emit("file-access", node, f"calls .{func.attr}() on {self._text(func.value)}")

    def _check_exec(self, node: ast.Call, fname: str) -> None:
        """A constant payload is scanned as code (reported at the call); any other is hidden."""
        arg = _arg(node, 0, "source")
        if arg is None:
            return
        payload = _const_str(arg)
        if payload is None and isinstance(arg, ast.Constant) and isinstance(arg.value, bytes):
            payload = arg.value.decode("utf-8", "replace")
        if payload is None:
            self._emit("dynamic-code", node, f"{fname}() of a computed string")
            return
        try:
            tree = safe_ast.parse(payload)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return  # it fails when run, too
        for f in Scanner(payload, self.filename, parent=self).scan(tree):
            self._emit(f.rule, node, f"in {fname}() string: {f.message}")


def _main_block_lines(tree: ast.AST) -> set[int]:
    """Lines of top-level ``if __name__ == "__main__":`` bodies, which the kernel loader
    never runs (it imports under another name): empty when anything in the file could
    make that test true (a write of ``__name__``, a ``"__name__"`` string or keyword)."""
    for n in ast.walk(tree):
        if (
            (isinstance(n, (ast.Name, ast.Attribute)) and not isinstance(n.ctx, ast.Load)
             and (getattr(n, "id", None) or getattr(n, "attr", None)) == "__name__")
            or (isinstance(n, ast.Constant) and "__name__" in str(n.value))
            or (isinstance(n, ast.keyword) and n.arg == "__name__")
            or (isinstance(n, (ast.Global, ast.Nonlocal)) and "__name__" in n.names)
        ):  # fmt: skip
            return set()
    lines: set[int] = set()
    for stmt in getattr(tree, "body", []):
        test = stmt.test if isinstance(stmt, ast.If) else None
        if (
            isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and {ast.dump(test.left), ast.dump(test.comparators[0])}
            == {ast.dump(ast.Name("__name__", ast.Load())), ast.dump(ast.Constant("__main__"))}
        ):  # fmt: skip
            lines.update(range(stmt.body[0].lineno, (stmt.body[-1].end_lineno or 0) + 1))
    return lines


def _in_main(f: Finding) -> Finding:
    message = f"{f.message} (in the __main__ block, not run on import)"
    return Finding(f.rule, WARNING, f.file, f.line, f.col, message)


def _pairs(target: ast.expr, value: ast.expr) -> list[tuple[str, ast.expr]]:
    """(name, value) bindings of a plain or tuple-to-tuple assignment."""
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
        if len(target.elts) == len(value.elts):
            return [(t.id, v) for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Name)]
    return []
