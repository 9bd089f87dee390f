"""A solution's Python as a program (names resolved), and the rules that hold everywhere in it.

Checks read the `ast`, never regexes over the text. Names are resolved through imports and
assignments (`import torch as T`, `from torch.nn import functional as F`, `F = torch.nn.functional`,
`getattr(torch, "relu")`), so an alias does not hide a use. Imports, patching, reflection, fallbacks,
threads and seeds are refused anywhere in the files; screening.forward looks at what forward runs.
"""

from __future__ import annotations

import ast
import builtins
import symtable
from collections.abc import Mapping
from dataclasses import dataclass, field

from evalsvc.screening import triton_names

Hit = tuple[str, str, int, str]  # rule, file, line, why

NODE_LIMIT = 50_000  # syntax nodes per file; real solutions have a few thousand
EXT = "@ext"  # resolved-name root of a compiled extension (what load_inline/load returned)
LOADERS = {"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"}
ALLOWED_ROOTS = {"torch", "math", "typing", "typing_extensions", "__future__", "dataclasses", "functools",
                 "enum", "abc", "cuda_extension", "triton"}  # fmt: skip
REFERENCE_MODULES = {"task", "reference", "model", "problem", "ref", "kernelbench", "models"}
_UNSEEN = "can run work that the timer does not see"
_GROUPS = [  # (rule, why, names): the first match wins; "x*" is a prefix, "=x" only x itself
    ("", "",
     ("torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load",
      "=torch.utils.cpp_extension")),
    # Triton: the decorators that define and launch kernels, nothing of its runtime; the kernel language
    # (`triton.language.*`) is decided by triton_language_allowed before these.
    ("", "",
     ("=triton", "triton.jit", "triton.autotune", "triton.Config", "triton.heuristics", "triton.cdiv",
      "triton.next_power_of_2")),
    ("forbidden-attribute", "is Triton's benchmarking harness: timing belongs to the judge",
     ("triton.testing", "triton.runtime.driver.active.get_benchmarker")),
    ("forbidden-attribute", "reaches Triton's runtime, compiler, cache or knobs, which belong to the harness",
     ("triton",)),
    ("torch-compile", "hands the work to PyTorch's compiler",
     ("torch.compile", "torch.jit", "torch._dynamo", "torch._inductor")),
    ("concurrency", _UNSEEN + " (threads, processes, side streams)",
     ("torch.multiprocessing", "torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.current_stream",
      "torch.cuda.default_stream", "torch.cuda.set_stream", "torch.cuda.ExternalStream", "torch.Stream",
      "torch.accelerator.set_stream", "torch.accelerator.current_stream", "os.fork*",
      "os.system", "os.popen", "os.spawn*", "os.posix_spawn*", "os.exec*")),
    ("forbidden-attribute", "belongs to the harness's timer",
     ("torch.cuda.Event", "torch.cuda.synchronize", "torch.cuda.set_sync_debug_mode", "torch.profiler",
      "torch.autograd.profiler", "torch.Event", "torch.accelerator.synchronize")),
    ("forbidden-attribute", "belongs to the harness's allocator",
     ("torch.cuda.memory*", "torch.cuda.max_memory*", "torch.cuda.empty_cache",
      "torch.cuda.caching_allocator*", "torch.cuda.CUDAGraph", "torch.cuda.graph*")),
    ("forbidden-attribute", "controls seeds, with which a solution can regenerate the judge's inputs",
     ("torch.cuda.manual_seed*", "torch.cuda.seed*", "torch.cuda.random", "torch.cuda.set_rng_state*",
      "torch.cuda.get_rng_state*", "torch.manual_seed", "torch.seed", "torch.initial_seed", "torch.random",
      "torch.Generator", "torch.set_rng_state", "torch.get_rng_state")),
    ("forbidden-attribute", "belongs to the judge (comparison, precision, process state, torch internals)",
     ("torch.testing", "torch.backends", "torch.set_*", "torch.use_deterministic_algorithms",
      "torch.library", "torch.overrides", "torch._C", "torch.fx", "torch.utils")),
    ("forbidden-attribute", "reaches files, processes or the interpreter, which belong to the sandbox",
     ("torch.load", "torch.save", "torch.hub", "torch.distributed", "torch.ops.load_library",
      "torch.classes.load_library", "os", "sys", "builtins.open",
      "builtins.exit", "builtins.quit", "builtins.SystemExit", "builtins.KeyboardInterrupt",
      "builtins.breakpoint", "builtins.input")),
    ("tensor-subclass", "makes tensors that can defer or fake their values",
     ("torch.Tensor._make_subclass", "torch.Tensor._make_wrapper_subclass")),
    ("caching", "returns cached results instead of running the kernel",
     ("functools.lru_cache", "functools.cache", "functools.cached_property")),
    ("fallback-handler", "hides a failing kernel behind a fallback",
     ("contextlib.suppress",)),
    ("dynamic-lookup", "reaches code or names by string, out of the checks' sight",
     ("builtins.eval", "builtins.exec", "builtins.compile", "builtins.__import__", "builtins.globals",
      "builtins.locals", "builtins.vars", "builtins.delattr", "importlib")),
]  # fmt: skip
NAME_RULES = [(name, rule, why) for rule, why, names in _GROUPS for name in names]
MODULE_RULES = {  # modules refused with a rule of their own; others outside ALLOWED_ROOTS: forbidden-import
    **{m: ("concurrency", _UNSEEN) for m in ("threading", "_thread", "multiprocessing", "concurrent")},
    "asyncio": ("concurrency", _UNSEEN),
    "subprocess": ("concurrency", "child processes run outside the kernel"),
    "signal": ("concurrency", "signal handlers can interrupt the harness"),
    "importlib": ("dynamic-lookup", "imports modules by string, out of the checks' sight"),
}
REFLECTIVE = {"__dict__", "__getattribute__", "__builtins__", "__import__", "__loader__", "__spec__"}
FRAMES = {"__globals__", "__code__", "__closure__", "__subclasses__", "__class__", "__bases__", "__mro__",
          "__reduce__", "__reduce_ex__", "__setattr__", "__delattr__", "f_back", "f_globals", "f_locals",
          "f_builtins", "f_code", "gi_frame", "tb_frame", "cr_frame"}  # fmt: skip
NN_MODULE = {"torch.nn.Module", "torch.nn.modules.module.Module"}
_BUILTINS = set(dir(builtins))
# Names every module has without binding them (builtins' own __name__, __doc__... are in _BUILTINS).
MODULE_DUNDERS = {"__file__", "__name__", "__doc__", "__qualname__", "__module__", "__annotations__"}
UNDEFINED_NAME = "undefined-name"
TRITON_LANGUAGE = "triton.language"
_NOT_LANGUAGE = (
    "is not a public name of Triton's kernel language (`triton.language.__all__`, a libdevice function): "
    "triton.language's modules re-export builtins, inspect, pkgutil and Triton's knobs"
)
# Triton's modules as objects: passed or bound as a value, their attributes are out of the name rules' sight.
TRITON_MODULES = {"triton", TRITON_LANGUAGE} | {
    f"{TRITON_LANGUAGE}.{m}"
    for m in ("extra", "math", "target_info", "extra.libdevice", "extra.cuda", "extra.hip",
              "extra.cuda.libdevice", "extra.hip.libdevice")
}  # fmt: skip


def triton_language_allowed(q: str) -> bool:
    """`triton.language.<name>` for a name of its `__all__` (the submodules math and target_info: their
    public functions only), and the device libraries' functions (`triton.language.extra[.cuda|.hip]
    .libdevice.<fn>`). Nothing deeper, nothing else: `triton.language.core` re-exports builtins, inspect,
    math and triton.knobs, `triton.language.extra` pkgutil."""
    parts = q.split(".")[2:]
    if not parts:
        return True
    head, rest = parts[0], parts[1:]
    if head not in triton_names.LANGUAGE:
        return False
    if not rest:
        return True
    if head == "math":
        return len(rest) == 1 and rest[0] in triton_names.MATH
    if head == "target_info":
        return len(rest) == 1 and rest[0] in triton_names.TARGET_INFO
    if head != "extra":
        return False
    libraries = {
        ("libdevice",): triton_names.LIBDEVICE,
        ("cuda", "libdevice"): triton_names.CUDA_LIBDEVICE,
        ("hip", "libdevice"): triton_names.HIP_LIBDEVICE,
    }
    path = tuple(rest)
    if path in libraries or path in (("cuda",), ("hip",)):
        return True
    return path[:-1] in libraries and path[-1] in libraries[path[:-1]]


# Modules that other modules re-export as attributes (`torch.accelerator.torch` is torch, `torch.cuda.os`
# is os): a name reached through one is screened as that module's own (red team 5).
REEXPORTED = frozenset(
    [
        "torch",
        "triton",
        "os",
        "sys",
        "ctypes",
        "subprocess",
        "importlib",
        "builtins",
        "gc",
        "inspect",
        "threading",
        "_thread",
        "multiprocessing",
        "socket",
        "pathlib",
        "shutil",
    ]
)
SUBMODULES = frozenset(("torch.multiprocessing",))  # real submodules named like one of those


def canonical(q: str) -> str:
    """`q` from its last re-exported module on: `torch.accelerator.torch.cuda.Event` is `torch.cuda.Event`."""
    parts = q.split(".")
    for i in range(len(parts) - 1, 0, -1):
        if parts[i] in REEXPORTED and ".".join(parts[: i + 1]) not in SUBMODULES:
            return ".".join(parts[i:])
    return q


def match_rule(q: str) -> tuple[str, str] | None:
    """The (rule, why) for a resolved name, or for the name it re-exports; None when both are allowed."""
    return _match_rule(q) or _match_rule(canonical(q))


def _match_rule(q: str) -> tuple[str, str] | None:
    if q == TRITON_LANGUAGE or q.startswith(TRITON_LANGUAGE + "."):
        return None if triton_language_allowed(q) else ("forbidden-attribute", _NOT_LANGUAGE)
    for pattern, rule, why in NAME_RULES:
        if pattern.startswith("="):
            hit = q == pattern[1:]
        elif pattern.endswith("*"):
            hit = q.startswith(pattern[:-1])
        else:
            hit = q == pattern or q.startswith(pattern + ".")
        if hit:
            return (rule, why) if rule else None
    return None


def src(node: ast.AST, limit: int = 60) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # a hostile tree only costs the report its quote
        return "<expr>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def seen(node: ast.AST, q: str) -> str:
    text = src(node)
    return f"`{q}`" if text == q else f"`{text}` (`{q}`)"


@dataclass
class Attr:
    """What `self.<name>` holds, as far as the class's own assignments tell."""

    kind: str  # "ext", "alias", "nnmod", "local", "tensor", "other"
    target: str = ""  # ext/alias: the resolved name; local: the class's resolved name


@dataclass
class Module:
    fname: str
    stem: str
    tree: ast.Module
    text: str = ""
    aliases: dict[str, str] = field(default_factory=dict)
    defs: dict[str, ast.AST] = field(default_factory=dict)  # module-level functions and classes
    assigned: set[str] = field(default_factory=set)  # every name bound anywhere (shadows builtins)
    top: set[str] = field(default_factory=set)  # names bound at module level
    parents: dict[int, ast.AST] = field(default_factory=dict)


@dataclass
class ClassInfo:
    mod: Module
    node: ast.ClassDef
    methods: dict[str, ast.AST] = field(default_factory=dict)
    attrs: dict[str, Attr] = field(default_factory=dict)


def qual(node: ast.AST, mod: Module, attrs: Mapping[str, Attr] | None = None) -> str | None:
    """The dotted name an expression refers to (`F.relu` -> `torch.nn.functional.relu`), if known."""
    if isinstance(node, ast.Name):
        return resolve_name(node.id, mod)
    if isinstance(node, ast.Attribute):
        if attrs is not None and is_self_attr(node):
            attr = attrs.get(node.attr)
            return attr.target if attr and attr.kind in ("alias", "ext") else None
        base = qual(node.value, mod, attrs)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, ast.Call) and is_const_getattr(node):
        base = qual(node.args[0], mod, attrs)
        return f"{base}.{node.args[1].value}" if base else None  # type: ignore[attr-defined]
    return None


def resolve_name(name: str, mod: Module) -> str | None:
    if name in mod.aliases:
        return mod.aliases[name]
    if name in mod.defs:
        return f"{mod.stem}.{name}"
    return f"builtins.{name}" if name in _BUILTINS and name not in mod.assigned else None


def is_const_getattr(node: ast.Call) -> bool:
    args = node.args
    named = len(args) >= 2 and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str)
    return isinstance(node.func, ast.Name) and node.func.id == "getattr" and named


def is_self_attr(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def root_name(node: ast.AST) -> ast.Name | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node if isinstance(node, ast.Name) else None


def is_ext(q: str) -> bool:
    return q.split(".")[0] in (EXT, "cuda_extension")


def params(fn: ast.AST) -> list[str]:
    a = fn.args  # type: ignore[attr-defined]
    return [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if p is not None]


def import_base(node: ast.ImportFrom) -> str:
    """The module an ImportFrom reads; relative imports name the solution's own modules."""
    if node.level == 0:
        return node.module or ""
    return (node.module or "").split(".")[-1]


def parse_modules(files: Mapping[str, str]) -> tuple[list[Module], list[Hit]]:
    mods, hits = [], []
    for fname, text in files.items():
        try:
            tree = ast.parse(text, filename=fname)
        except SyntaxError as e:
            hits.append(("syntax-error", fname, e.lineno or 1, f"the file does not parse: {e.msg}"))
            continue
        except (ValueError, MemoryError, RecursionError) as e:
            hits.append(("syntax-error", fname, 1, f"the file does not parse ({type(e).__name__})"))
            continue
        if sum(1 for _ in ast.walk(tree)) > NODE_LIMIT:
            hits.append(
                ("too-complex", fname, 1, f"more than {NODE_LIMIT} syntax nodes, too large to analyse")
            )
            continue
        mods.append(Module(fname, fname.rsplit("/", 1)[-1].removesuffix(".py"), tree, text))
    return mods, hits


def bind_names(mod: Module) -> None:
    """Aliases from imports and from assignments of resolvable names, in every scope of the file."""
    mod.defs = {
        s.name: s
        for s in mod.tree.body
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    pairs: list[tuple[ast.AST, ast.AST]] = []
    for node in ast.walk(mod.tree):
        for child in ast.iter_child_nodes(node):
            mod.parents[id(child)] = node
        if isinstance(node, ast.Import | ast.ImportFrom):
            _bind_import(mod, node)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            mod.assigned.add(node.id)
        elif isinstance(node, ast.arg):
            mod.assigned.add(node.arg)
        elif isinstance(node, ast.Assign):
            pairs += [(t, node.value) for t in node.targets]
        elif isinstance(node, ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            pairs.append((node.target, node.value))
    mod.top = set(mod.defs) | _module_level_names(mod.tree)
    for _ in range(3):  # a few rounds settle chains such as `F = nn.functional; g = F.gelu`
        for target, value in pairs:
            _bind(mod, target, value)


def _module_level_names(tree: ast.Module) -> set[str]:
    """Names bound outside functions and classes (module globals)."""
    out: set[str] = set()
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _bind_import(mod: Module, node: ast.Import | ast.ImportFrom) -> None:
    for a in node.names:
        if isinstance(node, ast.Import):
            top = a.name.split(".")[0]
            mod.aliases[a.asname or top] = a.name if a.asname else top
        else:
            base = import_base(node)
            mod.aliases[a.asname or a.name] = f"{base}.{a.name}" if base else a.name


def _bind(mod: Module, target: ast.AST, value: ast.AST) -> None:
    if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List):
        for t, v in zip(target.elts, value.elts, strict=False):
            _bind(mod, t, v)
    elif isinstance(target, ast.Name):
        loader = isinstance(value, ast.Call) and qual(value.func, mod) in LOADERS
        q = EXT if loader else qual(value, mod)
        if q:
            mod.aliases[target.id] = q


def undefined_names(mod: Module) -> dict[str, ast.AST]:
    """Global names the file reads but binds nowhere (no import, def, class, assignment, loop, with, except
    or match target, `global` statement) and that are not builtins, each with where it is first read. Such
    a name can only come from whoever fills the module's globals behind the solution's back (Triton's
    interpreter copies its own `np`, `inspect`, `triton`... into a kernel's module): no rule resolves it."""
    top = symtable.symtable(mod.text, mod.fname, "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_local()}
    read: set[str] = set()
    todo = [top]
    while todo:
        table = todo.pop()
        todo.extend(table.get_children())
        for sym in table.get_symbols():
            if sym.is_declared_global() and (sym.is_assigned() or sym.is_imported() or sym.is_namespace()):
                bound.add(sym.get_name())
            if sym.is_referenced() and sym.is_global():
                read.add(sym.get_name())
    missing = read - bound - _BUILTINS - MODULE_DUNDERS
    where: dict[str, ast.AST] = {}
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Name) and node.id in missing and node.id not in where:
            where[node.id] = node
    return {name: where.get(name, mod.tree) for name in sorted(missing)}


class Program:
    """All Python files of one solution, with names resolved and classes described."""

    def __init__(self, modules: list[Module]) -> None:
        self.mods = {m.stem: m for m in modules}
        self.hits: list[Hit] = []
        for m in modules:
            bind_names(m)
        self.classes = {
            f"{m.stem}.{n}": ClassInfo(m, d)
            for m in modules
            for n, d in m.defs.items()
            if isinstance(d, ast.ClassDef)
        }
        for info in self.classes.values():
            self.collect_attrs(info)
        self.model = self.find_model()

    def find_model(self) -> ClassInfo | None:
        """The class the harness instantiates: `class ModelNew`, or a class bound as `ModelNew = Impl`."""
        for m in self.mods.values():
            q = f"{m.stem}.ModelNew" if "ModelNew" in m.defs else m.aliases.get("ModelNew")
            if q in self.classes:
                return self.classes[q]
        return None

    def hit(self, rule: str, mod: Module, node: ast.AST, why: str) -> None:
        self.hits.append((rule, mod.fname, getattr(node, "lineno", 1), why))

    def local_def(self, q: str | None) -> tuple[Module, ast.AST] | None:
        stem, _, name = (q or "").rpartition(".")
        mod = self.mods.get(stem)
        node = mod.defs.get(name) if mod else None
        return (mod, node) if mod is not None and node is not None else None

    def collect_attrs(self, info: ClassInfo) -> None:
        """Classify `self.x = ...` (in any method) and class-level assignments."""
        for stmt in info.node.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                info.methods[stmt.name] = stmt
            elif isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        info.attrs[t.id] = self.classify(stmt.value, info.mod)
        for node in ast.walk(info.node):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and is_self_attr(t):
                        info.attrs.setdefault(t.attr, self.classify(node.value, info.mod))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                arg = node.args[0]
                if node.func.attr in ("register_buffer", "register_parameter") and isinstance(
                    arg, ast.Constant
                ):
                    info.attrs[str(arg.value)] = Attr("tensor")

    def classify(self, value: ast.AST, mod: Module) -> Attr:
        if not isinstance(value, ast.Call):
            q = qual(value, mod)
            return Attr("ext" if is_ext(q) else "alias", q) if q else Attr("other")
        q = qual(value.func, mod) or ""
        found = self.local_def(q)
        if q in LOADERS:
            return Attr("ext", EXT)
        if found and isinstance(found[1], ast.ClassDef):
            return Attr("local", q)
        if q.startswith("torch.nn."):
            return Attr("tensor" if q.rsplit(".", 1)[-1] in ("Parameter", "Buffer") else "nnmod")
        return Attr("tensor" if q.startswith("torch.") else "other")


class GlobalScan(ast.NodeVisitor):
    """Rules that hold everywhere in the solution's Python: imports, patching, reflection, fallbacks."""

    def __init__(self, prog: Program, mod: Module) -> None:
        self.prog, self.mod = prog, mod

    def hit(self, rule: str, node: ast.AST, why: str) -> None:
        self.prog.hit(rule, self.mod, node, why)

    def name_rule(self, q: str, node: ast.AST) -> None:
        found = match_rule(q)
        if found:
            self.hit(found[0], node, f"{seen(node, q)} {found[1]}")

    def check_module(self, name: str, node: ast.AST) -> None:
        root = name.split(".")[0]
        if root in self.prog.mods:
            return
        if root in REFERENCE_MODULES:
            self.hit("reference-model", node, f"importing `{name}` reaches the reference problem")
        elif root in MODULE_RULES:
            self.hit(MODULE_RULES[root][0], node, f"`{name}` {MODULE_RULES[root][1]}")
        elif root not in ALLOWED_ROOTS:
            allowed = ", ".join(sorted(ALLOWED_ROOTS - {"typing_extensions", "__future__"}))
            self.hit(
                "forbidden-import", node, f"`{name}` is outside the import allowlist ({allowed}, own files)"
            )
        else:
            self.name_rule(name, node)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.check_module(a.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = import_base(node)
        if node.level == 0:
            self.check_module(base, node)
        for a in node.names:
            if a.name == "Model":
                self.hit("reference-model", node, f"`from {base} import Model` brings in the reference model")
            elif node.level == 0 and base.split(".")[0] in ALLOWED_ROOTS:
                self.name_rule(f"{base}.{a.name}", node)

    def visit_Module(self, node: ast.Module) -> None:
        try:
            undefined = undefined_names(self.mod)
        except SyntaxError as e:  # what ast accepts but the compiler does not (`return` outside a function)
            self.hit("syntax-error", node, f"the file does not compile: {e.msg}")
            undefined = {}
        for name, where in undefined.items():
            why = (
                f"`{name}` is read but bound nowhere in the file (no import, def, class or assignment) and "
                "is not a builtin: it can only come from globals filled behind the solution's back"
            )
            self.hit(UNDEFINED_NAME, where, why)
        self.generic_visit(node)

    def module_as_value(self, q: str, node: ast.AST) -> None:
        """`f(tl)`, `m = tl.extra`: a Triton module as an object, whose attributes escape the name rules."""
        parent = self.mod.parents.get(id(node))
        if q in TRITON_MODULES and not (isinstance(parent, ast.Attribute) and parent.value is node):
            why = "is used as a value: a Triton module may only be named (`module.name`), where rules see it"
            self.hit("forbidden-attribute", node, f"{seen(node, q)} {why}")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "Model":
            self.hit("reference-model", node, "the solution names `Model`, the reference model")
        elif node.id in REFLECTIVE:
            self.hit("dynamic-lookup", node, f"`{node.id}` reaches the interpreter by string")
        q = resolve_name(node.id, self.mod)
        if q and isinstance(node.ctx, ast.Load):
            self.name_rule(q, node)
            self.module_as_value(q, node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain: ast.AST = node
        while isinstance(chain, ast.Attribute):
            if chain.attr in REFLECTIVE | FRAMES:
                rule = "dynamic-lookup" if chain.attr in REFLECTIVE else "forbidden-attribute"
                self.hit(rule, node, f"`{src(node)}` reaches objects, frames or code by reflection")
            chain = chain.value
        q = qual(node, self.mod)
        if q is None:
            self.generic_visit(node)
        elif isinstance(node.ctx, ast.Load):
            self.name_rule(q, node)
            self.module_as_value(q, node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "as_subclass":
            self.hit(
                "tensor-subclass", node, f"`{src(node)}` makes a tensor subclass that can defer its values"
            )
        q = qual(node.func, self.mod)
        if (
            q in ("builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.hasattr")
            and node.args
        ):
            self.reflective(node, q.rsplit(".", 1)[-1])
        elif q == "torch.utils.cpp_extension.load":
            self.check_load(node)
        self.generic_visit(node)

    def reflective(self, node: ast.Call, fn: str) -> None:
        base = node.args[0]
        on_self = isinstance(base, ast.Name) and base.id == "self"
        named = len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
        base_q = qual(base, self.mod)
        if fn == "setattr" and base_q and not on_self:
            self.hit("forbidden-attribute", node, f"`{src(node)}` patches `{base_q}` (monkeypatching)")
        elif not named and not on_self:
            self.hit("dynamic-lookup", node, f"`{src(node)}` looks an attribute up by a computed name")

    def check_load(self, node: ast.Call) -> None:
        """cpp_extension.load may only build the solution's own files (plain relative names)."""
        sources = next((k.value for k in node.keywords if k.arg == "sources"), None)
        if sources is None and len(node.args) > 1:
            sources = node.args[1]
        for s in sources.elts if isinstance(sources, ast.List | ast.Tuple) else [sources]:
            path = s.value if isinstance(s, ast.Constant) and isinstance(s.value, str) else "/"
            if path.startswith("/") or ".." in path or not path.endswith((".cu", ".cpp", ".cc")):
                self.hit(
                    "forbidden-attribute",
                    node,
                    f"`load` builds `{src(s) if s else '?'}`, not a solution file",
                )

    def visit_Assign(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> None:
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        for t in targets:
            for part in t.elts if isinstance(t, ast.Tuple | ast.List) else [t]:
                self.patched(part)
        self.generic_visit(node)

    visit_AugAssign = visit_AnnAssign = visit_Delete = visit_Assign

    def patched(self, target: ast.AST) -> None:
        """`torch.cuda.synchronize = ...`, `F.relu = ...`: assigning into an imported module or object."""
        root = root_name(target)
        if isinstance(target, ast.Attribute | ast.Subscript) and root is not None and root.id != "self":
            q = self.mod.aliases.get(root.id)
            if q and q.split(".")[0] not in self.prog.mods:
                self.hit(
                    "forbidden-attribute",
                    target,
                    f"assigning to `{src(target)}` patches `{q}` (monkeypatching)",
                )

    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        for h in node.handlers:
            if not (h.body and isinstance(h.body[-1], ast.Raise)):
                caught = src(h.type) if h.type is not None else "everything"
                self.hit(
                    "fallback-handler", h, f"`except {caught}` without re-raising can hide a failing kernel"
                )
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name == "Model":
            self.hit("reference-model", node, "the solution defines `Model`, the reference model's name")
        for base in node.bases:
            q = qual(base, self.mod) or src(base)
            if q == "torch.Tensor" or q.startswith("torch.Tensor."):
                self.hit(
                    "tensor-subclass", node, f"`{node.name}` subclasses torch.Tensor: values can be deferred"
                )
            elif self.prog.model is not None and node is self.prog.model.node and q not in NN_MODULE:
                self.hit("reference-model", node, f"ModelNew derives from `{q}`, not from nn.Module")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.hit(
                "tensor-subclass", node, f"`{node.name}` intercepts torch calls on the solution's tensors"
            )
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef
