"""What ModelNew.forward reaches, and PyTorch compute or cross-call state in it.

Forward is followed into the methods, functions, lambdas and local classes it reaches in the
solution's files. Tensors are tracked by flow: forward's parameters, what the extension, torch and
tensor methods return, parameters and buffers of the model. Allocation, views, metadata and
conversions are allowed; other torch calls, nn submodule calls, tensor methods that compute and
operators on tensors are not, nor is state stored across calls (caches, counters, deferred work).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from evalsvc.core.rules import TORCH_COMPUTE_IN_FORWARD
from evalsvc.screening.python import (
    Attr,
    ClassInfo,
    Module,
    Program,
    is_const_getattr,
    is_ext,
    is_self_attr,
    match_rule,
    params,
    qual,
    root_name,
    seen,
    src,
)
from evalsvc.screening.triton import is_kernel

# What forward may use from torch: namespaces, allocation, views, metadata, dtypes, devices, the loader.
TORCH_OK = {
    "torch", "torch.nn", "torch.nn.functional", "torch.cuda", "torch.utils", "torch.special",
    "torch.linalg", "torch.fft", "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "empty_strided", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "permute",
    "transpose", "t", "narrow", "select", "split", "chunk", "unbind", "as_strided", "movedim", "swapaxes",
    "swapdims", "numel", "is_tensor", "is_floating_point", "is_complex", "Size", "device", "dtype", "finfo",
    "iinfo", "get_default_dtype", "promote_types", "can_cast", "no_grad", "inference_mode",
    "is_grad_enabled", "Tensor", "typename", "strided", "channels_last", "contiguous_format",
    "preserve_format", "layout", "memory_format", "float", "float32", "float64", "double", "float16",
    "half", "bfloat16", "int", "int8", "int16", "int32", "int64", "long", "short", "uint8", "bool",
    "complex64", "complex128", "cfloat", "cdouble", "float8_e4m3fn", "float8_e5m2", "nn.Parameter",
    "nn.Module", "cuda.current_device", "cuda.device", "cuda.device_count", "cuda.is_available",
    "cuda.get_device_properties", "cuda.get_device_capability", "cuda.get_device_name",
    "cuda.is_initialized", "utils.cpp_extension.load_inline", "utils.cpp_extension.load", "inf", "nan",
    "pi", "e",
}  # fmt: skip
# Tensor methods forward may call: metadata, then views, layout, conversions, copies, allocation.
META_METHODS = {"size", "dim", "ndimension", "numel", "nelement", "stride", "data_ptr", "is_contiguous",
                "element_size", "storage_offset", "get_device", "is_floating_point", "is_complex", "item",
                "tolist", "dim_order", "__len__"}  # fmt: skip
TENSOR_OK = META_METHODS | {
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten",
    "unsqueeze", "squeeze", "permute", "transpose", "t", "contiguous", "expand", "expand_as", "narrow",
    "select", "split", "chunk", "as_strided", "unbind", "movedim", "swapaxes", "swapdims", "unfold", "to",
    "float", "half", "double", "bfloat16", "int", "long", "short", "bool", "cpu", "cuda", "type", "type_as",
    "detach", "clone", "copy_", "zero_", "fill_", "new_empty", "new_zeros", "new_ones", "new_full",
    "new_empty_strided", "requires_grad_", "pin_memory", "as_subclass",
}  # fmt: skip
# Names only tensors have: refused in forward whatever the receiver.
COMPUTE_METHODS = {
    "matmul", "mm", "bmm", "mv", "addmm", "addmv", "baddbmm", "addbmm", "relu", "relu_",
    "softmax", "log_softmax", "sigmoid", "sigmoid_", "tanh", "tanh_", "exp", "exp_", "clamp", "clamp_",
    "clamp_min", "clamp_max", "clip", "sum", "mean", "amax", "amin", "argmax", "argmin", "norm", "var",
    "std", "cumsum", "cumprod", "masked_fill", "masked_fill_", "index_select", "gather", "scatter",
    "scatter_", "scatter_add", "topk", "logsumexp", "addcmul", "addcdiv", "rsqrt", "sqrt", "square",
    "reciprocal", "erf", "maximum", "minimum", "outer", "lerp", "abs", "neg", "pow", "where", "mul_",
    "add_", "sub_", "div_", "apply_", "map_", "index_put_", "index_add_", "nan_to_num", "einsum",
}  # fmt: skip
META_ATTRS = {"shape", "dtype", "device", "ndim", "is_cuda", "is_cpu", "layout", "requires_grad", "names",
              "itemsize", "nbytes", "is_leaf", "is_sparse", "is_quantized", "eps", "in_features",
              "out_features", "normalized_shape", "training"}  # fmt: skip
TENSOR_ATTRS = {"weight", "bias", "running_mean", "running_var", "T", "mT", "H", "mH", "data", "real",
                "imag"}  # fmt: skip
MUTATORS = {"append", "extend", "insert", "update", "setdefault", "add", "pop", "popitem", "clear",
            "appendleft", "remove", "discard", "__setitem__"}  # fmt: skip
ARITH_BUILTINS = {"sum", "max", "min", "abs", "pow", "round", "divmod"}  # fmt: skip
NOT_TENSOR_TORCH = {"numel", "is_tensor", "is_floating_point", "is_complex", "finfo", "iinfo",
                    "get_default_dtype", "promote_types", "can_cast", "is_grad_enabled", "typename", "Size",
                    "device", "dtype", "no_grad", "inference_mode"}  # fmt: skip
OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
       ast.Pow: "**", ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitAnd: "&",
       ast.BitXor: "^"}  # fmt: skip

# Nodes through which tensors flow from one name to another.
FLOW = (
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.NamedExpr,
    ast.For,
    ast.AsyncFor,
    ast.comprehension,
    ast.Call,
)


def torch_ok(q: str) -> bool:
    return q in TORCH_OK or q.removeprefix("torch.") in TORCH_OK or match_rule(q) is not None


def _walk(node: ast.AST) -> list[ast.AST]:
    """ast.walk without annotations: they name types and compute nothing when the function runs."""
    out, todo = [], [node]
    while todo:
        n = todo.pop()
        out.append(n)
        for name, value in ast.iter_fields(n):
            if name not in ("annotation", "returns"):
                todo.extend(
                    v for v in (value if isinstance(value, list) else [value]) if isinstance(v, ast.AST)
                )
    return out


def _operands(e: ast.AST) -> list[ast.AST]:
    """The sub-expressions whose tensor-ness an operator, conditional or tuple takes on."""
    if isinstance(e, ast.BinOp):
        return [e.left, e.right]
    if isinstance(e, ast.AugAssign):
        return [e.target, e.value]
    if isinstance(e, ast.IfExp):
        return [e.body, e.orelse]
    if isinstance(e, ast.UnaryOp):
        return [e.operand]
    return list(e.elts) if isinstance(e, ast.Tuple | ast.List) else []


class ForwardScan:
    """PyTorch compute and cross-call state in one function that ModelNew.forward reaches."""

    def __init__(
        self, reach: Reach, mod: Module, cls: ClassInfo | None, fn: ast.AST, tensors: set[str], label: str
    ):
        self.reach, self.prog, self.mod, self.cls, self.label = reach, reach.prog, mod, cls, label
        self.attrs: Mapping[str, Attr] = cls.attrs if cls else {}
        self.tnames, self.modnames, self.ptrnames = set(tensors), set[str](), set[str]()
        self.nodes = _walk(fn)
        declared = {n for s in self.nodes if isinstance(s, ast.Global | ast.Nonlocal) for n in s.names}
        stores = {n.id for n in self.nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.local = (stores | set(params(fn))) - declared
        self.nested = {n.name: n for n in self.nodes if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}

    def hit(self, rule: str, node: ast.AST, why: str) -> None:
        self.prog.hit(rule, self.mod, node, why)

    def compute(self, node: ast.AST, what: str) -> None:
        why = f"{what} computes in PyTorch inside {self.label}; the kernel must do the work"
        self.hit(TORCH_COMPUTE_IN_FORWARD, node, why)

    def state(self, node: ast.AST, what: str) -> None:
        why = f"`{src(node)}` {what} during {self.label}: state across calls can cache or count"
        self.hit("caching", node, why)

    def run(self) -> None:
        flow = [n for n in self.nodes if isinstance(n, FLOW)]
        for _ in range(3):
            before = len(self.tnames) + len(self.modnames) + len(self.ptrnames)
            for node in flow:
                self.propagate(node)
            if len(self.tnames) + len(self.modnames) + len(self.ptrnames) == before:
                break
        for any_node in self.nodes:
            self.visit(any_node)

    # -- what is a tensor --------------------------------------------------------------------------
    def propagate(self, node: ast.AST) -> None:
        pairs: list[tuple[ast.AST, ast.AST]] = []
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, ast.AugAssign | ast.AnnAssign | ast.NamedExpr) and node.value is not None:
            pairs = [(node.target, node.value)]
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            pairs = [(node.target, node.iter)]
        elif isinstance(node, ast.Call):  # arguments of lambdas and nested functions
            fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | None
            fn = node.func if isinstance(node.func, ast.Lambda) else None
            fn = self.nested.get(node.func.id, fn) if isinstance(node.func, ast.Name) else fn
            self.tnames |= self.mapped(fn, node, skip_self=False) if fn is not None else set()
        for target, value in pairs:
            names = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            self.tnames |= names if self.is_tensor(value) else set()
            self.modnames |= names if self.is_module(value) else set()
            self.ptrnames |= names if self.uses_ptr(value) else set()

    def mapped(self, fn: ast.AST, call: ast.Call, skip_self: bool) -> set[str]:
        """The parameters of `fn` that this call passes tensors to."""
        names = params(fn)[1 if skip_self else 0 :]
        out = {k.arg for k in call.keywords if k.arg and self.is_tensor(k.value)}
        for i, a in enumerate(call.args):
            if isinstance(a, ast.Starred) and self.is_tensor(a.value):
                return set(names)
            if i < len(names) and self.is_tensor(a):
                out.add(names[i])
        return out

    def is_tensor(self, e: ast.AST) -> bool:
        if isinstance(e, ast.Name):
            return e.id in self.tnames
        if isinstance(e, ast.Attribute):
            return self.attr_is_tensor(e)
        if isinstance(e, ast.Subscript | ast.Starred | ast.NamedExpr):
            return self.is_tensor(e.value)
        if isinstance(e, ast.Call):
            return self.call_is_tensor(e)
        return any(self.is_tensor(p) for p in _operands(e))

    def attr_is_tensor(self, e: ast.Attribute) -> bool:
        if e.attr in META_ATTRS:
            return False
        if is_self_attr(e):
            attr = self.attrs.get(e.attr)
            return attr is not None and attr.kind == "tensor"
        return self.is_tensor(e.value) or (e.attr in TENSOR_ATTRS and self.is_module(e.value))

    def call_is_tensor(self, c: ast.Call) -> bool:
        q = qual(c.func, self.mod, self.attrs)
        if q:
            torch_value = q.startswith("torch.") and not q.startswith("torch.cuda.")
            return is_ext(q) or (torch_value and q.rsplit(".", 1)[-1] not in NOT_TENSOR_TORCH)
        if self.is_module(c.func):
            return True
        if not isinstance(c.func, ast.Attribute):
            return False
        recv, m = c.func.value, c.func.attr
        if self.is_tensor(recv):
            return m not in META_METHODS
        return m in COMPUTE_METHODS or (m in ("forward", "__call__") and self.is_module(recv))

    def is_module(self, e: ast.AST) -> bool:
        """An nn submodule of the class (`self.fc1`, `self.layers[0]`, `layer` from `for layer in ...`)."""
        if isinstance(e, ast.Subscript):
            return self.is_module(e.value)
        if isinstance(e, ast.Name):
            return e.id in self.modnames
        attr = self.attrs.get(e.attr) if isinstance(e, ast.Attribute) and is_self_attr(e) else None
        return attr is not None and attr.kind == "nnmod"

    def uses_ptr(self, e: ast.AST) -> bool:
        """The expression involves a tensor's address or an object's identity (a cache key)."""
        for n in ast.walk(e):
            if isinstance(n, ast.Name) and n.id in self.ptrnames:
                return True
            if isinstance(n, ast.Call) and (
                (isinstance(n.func, ast.Attribute) and n.func.attr == "data_ptr")
                or qual(n.func, self.mod) in ("builtins.id", "builtins.hash")
            ):
                return True
        return False

    def is_state(self, e: ast.AST) -> bool:
        """Storage that outlives the call: attributes of self, module-level objects."""
        root = root_name(e)
        return root is not None and (
            root.id == "self" or (root.id in self.mod.top and root.id not in self.local)
        )

    # -- checks ------------------------------------------------------------------------------------
    def visit(self, node: ast.AST) -> None:
        parent = self.mod.parents.get(id(node))
        if isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Load):
            if not (isinstance(parent, ast.Attribute) and parent.value is node):
                self.ref(node, parent)
        elif isinstance(node, ast.Call):
            if is_const_getattr(node):  # getattr(torch, "relu") names torch.relu
                self.ref(node, parent)
            self.call(node)
        elif isinstance(node, ast.BinOp | ast.UnaryOp | ast.Compare | ast.AugAssign):
            self.operator(node)
        self.store(node)

    def store(self, node: ast.AST) -> None:
        if isinstance(node, ast.Global | ast.Nonlocal):
            self.state(node, "shares variables")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute | ast.Subscript) and self.is_state(t):
                    self.state(t, "is stored")
        lookup = (
            isinstance(node, ast.Subscript) and self.uses_ptr(node.slice) and not self.is_tensor(node.value)
        )
        member = isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn)
        if lookup or (member and self.uses_ptr(node.left)):  # type: ignore[attr-defined]
            self.state(node, "looks a result up by address or identity")

    def ref(self, node: ast.AST, parent: ast.AST | None) -> None:
        q = qual(node, self.mod, self.attrs)
        called = isinstance(parent, ast.Call) and parent.func is node
        found = self.prog.local_def(q)
        if q is None or is_ext(q) or (called and found):
            return
        if found:
            self.reach.enter(q, found, None)
        elif q.startswith("torch.") and not torch_ok(q):
            self.compute(node, seen(node, q))

    def call(self, node: ast.Call) -> None:
        q = qual(node.func, self.mod, self.attrs)
        found = self.prog.local_def(q)
        name = (q or "").removeprefix("builtins.")
        if found:
            self.reach.enter(q, found, (self, node))  # type: ignore[arg-type]
        elif q in ("builtins.id", "builtins.hash"):
            self.state(node, "keys something by object identity")
        elif q == "builtins.setattr" and node.args and src(node.args[0]) == "self":
            self.state(node, "stores state on self")
        elif (
            q and q.startswith("builtins.") and name in ARITH_BUILTINS and any(map(self.is_tensor, node.args))
        ):
            self.compute(node, f"`{src(node)}` on tensors")
        elif q is None and isinstance(node.func, ast.Attribute):
            self.method_call(node, node.func)
        elif q is None and self.is_module(node.func):
            self.compute(node, f"calling submodule `{src(node.func)}`")

    def method_call(self, node: ast.Call, func: ast.Attribute) -> None:
        m, recv = func.attr, func.value
        if is_self_attr(func):
            self.self_call(node, m)
        elif self.is_module(recv) and m in ("forward", "__call__"):
            self.compute(node, f"calling submodule `{src(recv)}`")
        elif m in MUTATORS and self.is_state(recv):
            self.state(node, "changes an object kept across calls")
        elif m in ("get", "setdefault", "pop") and any(self.uses_ptr(a) for a in node.args):
            self.state(node, "looks a result up by address or identity")
        elif qual(recv, self.mod, self.attrs) is None and (
            m in COMPUTE_METHODS or (self.is_tensor(recv) and m not in TENSOR_OK)
        ):
            self.compute(node, f"tensor method `.{m}()` in `{src(node)}`")

    def self_call(self, node: ast.Call, m: str) -> None:
        attr = self.attrs.get(m)
        if self.cls is not None and m in self.cls.methods:
            fn = self.cls.methods[m]
            self.reach.add(self.mod, self.cls, fn, self.mapped(fn, node, True), f"`{self.cls.node.name}.{m}`")
        elif attr is not None and attr.kind == "nnmod":
            self.compute(node, f"calling submodule `self.{m}` (a torch.nn module)")
        elif attr is not None and attr.kind == "local" and (found := self.prog.local_def(attr.target)):
            self.reach.enter(attr.target, found, None)

    def operator(self, node: ast.AST) -> None:
        if isinstance(node, ast.BinOp):
            sym = OPS.get(type(node.op), "?")
            if sym == "@" or self.is_tensor(node.left) or self.is_tensor(node.right):
                self.compute(node, f"operator `{sym}` on tensors (`{src(node)}`)")
        elif (
            isinstance(node, ast.UnaryOp)
            and not isinstance(node.op, ast.Not)
            and self.is_tensor(node.operand)
        ):
            self.compute(node, f"`{src(node)}` on a tensor")
        elif isinstance(node, ast.Compare):
            ordered = any(not isinstance(o, ast.Is | ast.IsNot | ast.In | ast.NotIn) for o in node.ops)
            if ordered and any(map(self.is_tensor, [node.left, *node.comparators])):
                self.compute(node, f"comparing tensors (`{src(node)}`)")
        elif isinstance(node, ast.AugAssign) and not self.is_state(node.target) and self.is_tensor(node):
            self.compute(node, f"in-place operator on tensors (`{src(node)}`)")


class Reach:
    """Functions reached from ModelNew.forward, each scanned once per set of tensor parameters."""

    LIMIT = 400

    def __init__(self, prog: Program) -> None:
        self.prog = prog
        self.seen: dict[int, set[str]] = {}
        self.queue: list[tuple[Module, ClassInfo | None, ast.AST, set[str], str]] = []

    def add(self, mod: Module, cls: ClassInfo | None, fn: ast.AST, tensors: set[str], name: str) -> None:
        prev = self.seen.get(id(fn))
        if prev is None or not tensors <= prev:
            self.seen[id(fn)] = (prev or set()) | tensors
            label = name if name.startswith("ModelNew.") else f"{name} (reached from ModelNew.forward)"
            self.queue.append((mod, cls, fn, self.seen[id(fn)], label))

    def enter(self, q: str, found: tuple[Module, ast.AST], via: tuple[ForwardScan, ast.Call] | None) -> None:
        mod, node = found
        if is_kernel(node, mod):  # Triton device code: launched, not run by forward (screening.triton)
            return
        if isinstance(node, ast.ClassDef) and (cls := self.prog.classes.get(q)):
            for name, fn in cls.methods.items():
                self.add(mod, cls, fn, set(params(fn)[1:]), f"`{node.name}.{name}`")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            tensors = via[0].mapped(node, via[1], skip_self=False) if via else set(params(node))
            self.add(mod, None, node, tensors, f"`{node.name}`")

    def run(self, cls: ClassInfo) -> None:
        for name in ("forward", "__call__"):
            if (fn := cls.methods.get(name)) is not None:
                self.add(cls.mod, cls, fn, set(params(fn)[1:]), f"ModelNew.{name}")
        for node in ast.walk(cls.node):  # hooks run around forward
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.args
                and node.func.attr in ("register_forward_hook", "register_forward_pre_hook")
            ):
                hook = node.args[0]
                if isinstance(hook, ast.Attribute) and is_self_attr(hook) and hook.attr in cls.methods:
                    fn = cls.methods[hook.attr]
                    self.add(cls.mod, cls, fn, set(params(fn)[1:]), f"ModelNew.{hook.attr} (a forward hook)")
                ForwardScan(self, cls.mod, cls, node, set(), "ModelNew's forward hook").ref(hook, None)
        for _ in range(self.LIMIT):
            if not self.queue:
                break
            mod, c, fn, tensors, label = self.queue.pop(0)
            ForwardScan(self, mod, c, fn, tensors, label).run()
