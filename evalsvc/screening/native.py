"""Static reward-hacking checks on a solution's C++/CUDA text: a small tokenizer, not a C++ parser.

Backslash-newline splices are joined first, then comments and the contents of string and character
literals are dropped, so text inside them never counts. The text may be raw source or what the C
preprocessor made of it (evalsvc.compiler.preprocess): its line markers (`# 12 "file"`) set the line
numbers, so findings point at the original lines either way. The checks read the token stream:
qualified names (`at::matmul`, and `cpu::mm` under `using namespace at;`), calls (`system(`), method
calls (`x.mm(`), declarations (`static torch::Tensor cache;`) and namespace-scope objects whose
initialisation runs code, with scopes tracked by braces so that a host function's tensor `x` and a
kernel's `float x` are told apart, and `__device__` code from host code.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

Hit = tuple[str, str, int, str]  # rule, file, line, why

MAX_HITS = 400  # per file: enough to refuse, bounded on hostile input
_UCN = r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"
# GCC takes `$`, UTF-8 and universal character names in identifiers: one token each, as it reads them.
ID_RE = re.compile(rf"(?:[A-Za-z_$\x80-\U0010ffff]|{_UCN})(?:[A-Za-z0-9_$\x80-\U0010ffff]|{_UCN})*")
NUMBER_RE = re.compile(r"\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.'])*")
STRING_PREFIXES = {"u8R", "uR", "UR", "LR", "R", "u8", "u", "U", "L"}
_UCN_RE = re.compile(_UCN)
_SPLICE_END = re.compile(r"\\[ \t\f\v\r]*$")  # GCC also splices a backslash followed by spaces
_OPS = ("%:%:", "<<=", ">>=", "...", "::", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
        "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##", "%:", "<%", "%>", "<:", ":>")  # fmt: skip
_DIGRAPHS = {"%:%:": "##", "%:": "#", "<%": "{", "%>": "}", "<:": "[", ":>": "]"}
_DIRECTIVE = re.compile(
    r"(?:#|%:)(?:[ \t\f\v\r]|/\*.*?\*/)*"
    r"(?:([0-9]+)|line[ \t]+([0-9]+)|(include_next|include|import|embed)\b([^\n]*)|([A-Za-z_]\w*))?",
    re.S,
)
_TORCH_NS = {"at", "torch", "c10", "caffe2"}
_SKIP_NS = {"at", "torch", "c10", "cuda", "detail", "impl"}
# Roots that never resolve through `using namespace at;`; and ATen's own sub-namespaces, which do even
# where the sources declare a namespace of that name.
_KNOWN_ROOTS = _TORCH_NS | {"std", "py", "pybind11", "gnu", "__gnu__", "__gnu_cxx", "cub", "thrust",
                            "cutlass", "cute", "nvcuda", "cooperative_groups"}  # fmt: skip
_ATEN_SUBNS = {"cpu", "native", "_ops", "cuda", "meta", "sparse", "nested", "linalg", "fft", "special", "nn",
               "functional", "indexing", "autograd", "jit", "vec", "quantized", "blas", "mps", "xpu",
               "compositeexplicitautograd", "compositeimplicitautograd", "functionalization",
               "compositeexplicitautogradnonfunctional"}  # fmt: skip
# `cuda::` names of libcu++, not of at::cuda.
_LIBCUDACXX = {"std", "ptx", "barrier", "pipeline", "memcpy_async", "aligned_size_t", "thread_scope",
               "atomic", "atomic_ref", "annotated_ptr", "access_property", "device"}  # fmt: skip
# The ATen/torch API a kernel may use: allocation, metadata, dtypes, devices, the current stream, guards.
_ATEN_OK = {
    "Tensor", "TensorOptions", "ScalarType", "Scalar", "IntArrayRef", "ArrayRef", "SymIntArrayRef",
    "Device", "DeviceType", "DeviceGuard", "OptionalDeviceGuard", "Half", "BFloat16", "Layout",
    "MemoryFormat", "optional", "nullopt", "Dtype", "TypeMeta", "empty", "empty_like", "zeros",
    "zeros_like", "ones", "ones_like", "full", "full_like", "empty_strided", "from_blob", "dtype", "device",
    "layout", "requires_grad", "getCurrentCUDAStream", "getDefaultCUDAStream", "CUDAStream", "CUDAGuard",
    "OptionalCUDAGuard", "getCurrentDeviceProperties", "getDeviceProperties", "current_device",
    "device_count", "parallel_for", "get_num_threads", "acc_type", "opmath_type", "toString", "elementSize",
    "irange", "wrap_pybind_function", "NoGradGuard", "InferenceMode", "Error", "ValueError", "TypeError",
    "IndexError", "isFloatingType", "isComplexType", "typeMetaToScalarType", "scalarTypeToTypeMeta",
    "MaybeOwned",
}  # fmt: skip
_VENDOR_PREFIXES = ("cublas", "cudnn", "cufft", "cusparse", "cusolver", "cutensor", "CUBLAS_", "CUDNN_",
                    "CUFFT_", "CUSPARSE_")  # fmt: skip
_VENDOR_NAMES = {"getCurrentCUDABlasHandle", "getCurrentCUDABlasLtHandle", "getCurrentCUDASparseHandle",
                 "getCudnnHandle", "getCurrentCUDASolverDnHandle"}  # fmt: skip
# Calls that leave the kernel's job: processes, files, sockets, the environment, threads, timers, signals,
# side streams. Refused when called, or taken as a value (`&write`) where no variable of the name is seen.
_ESCAPE_CALLS = {
    "system", "popen", "fork", "vfork", "execl", "execle", "execlp", "execv", "execve", "execvp", "execvpe",
    "posix_spawn", "posix_spawnp", "dlopen", "dlsym", "dlmopen", "dlvsym", "dladdr", "dladdr1", "dlinfo",
    "dl_iterate_phdr", "fopen", "fopen64", "freopen", "fdopen", "open", "open64", "openat", "openat2",
    "creat", "socket", "socketpair", "connect", "accept", "accept4", "listen", "send", "sendto", "sendmsg",
    "recv", "recvfrom", "recvmsg", "sendfile", "splice", "tee", "vmsplice", "copy_file_range", "getenv",
    "secure_getenv", "setenv", "putenv", "unsetenv", "getauxval", "pthread_create", "clock_gettime",
    "gettimeofday", "clock", "time", "cudaEventElapsedTime", "cudaEventCreate", "cudaEventCreateWithFlags",
    "cudaEventRecord", "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority",
    "cudaDeviceSetLimit", "kill", "tgkill", "tkill", "raise", "sigqueue", "signal", "sigaction", "alarm",
    "setitimer", "timer_create", "timerfd_create", "eventfd", "inotify_init", "inotify_init1", "exit",
    "_exit", "_Exit", "quick_exit", "atexit", "at_quick_exit", "syscall", "ptrace", "prctl", "seccomp",
    "clone", "clone3", "unshare", "setns", "setrlimit", "prlimit", "mmap", "mremap", "mprotect",
    "pkey_mprotect", "process_vm_readv", "process_vm_writev", "memfd_create", "write", "pwrite", "writev",
    "pwritev", "read", "pread", "readv", "preadv", "fwrite", "dup", "dup2", "dup3", "pipe", "pipe2", "fcntl",
    "ioctl", "fstat", "stat", "lstat", "statx", "fstatat", "readlink", "readlinkat", "unlink", "rename",
    "chdir", "mkdir", "rmdir", "mkfifo", "shm_open", "truncate", "ftruncate", "symlink", "chmod", "chown",
    "getStreamFromPool", "getStreamFromExternal", "setCurrentCUDAStream",
}  # fmt: skip
# Names refused on any use: the process's environment and arguments, cycle counters, the loader's tables.
_NAME_ESCAPES = {
    "environ", "__environ", "_environ", "program_invocation_name", "program_invocation_short_name",
    "__progname", "__progname_full", "__libc_argv", "__libc_argc", "rdtsc", "__rdtsc", "__rdtscp", "_rdtsc",
    "__builtin_ia32_rdtsc", "__builtin_ia32_rdtscp", "__builtin_ia32_rdpmc", "__rdpmc", "_rdpmc",
    "__builtin_readcyclecounter", "__builtin_readsteadycounter", "__libc_dlopen_mode", "__libc_dlsym",
    "__libc_dlclose", "_dl_sym", "_r_debug", "_DYNAMIC", "_GLOBAL_OFFSET_TABLE_", "__ehdr_start",
    "__libc_stack_end", "__init_array_start", "__init_array_end", "__preinit_array_start",
}  # fmt: skip
_ESCAPE_TYPES = {"ifstream", "ofstream", "fstream", "CUDAStreamGuard", "OptionalCUDAStreamGuard",
                 "CUDAMultiStreamGuard", "CUDACachingAllocator", "CUDAEvent", "CUDAGraph"}  # fmt: skip
_STD_ESCAPES = {"thread", "jthread", "async", "chrono", "filesystem"}  # only after std::
_PY_ESCAPES = {"import", "module_import", "eval", "exec", "eval_file", "globals", "getattr", "setattr",
               "delattr", "hasattr", "builtins"}  # fmt: skip
_PY_TYPES_OK = {"Py_ssize_t"}
_ASM = {"asm", "__asm__", "__asm"}
_LOAD_ATTRS = {"constructor", "destructor", "init_priority"}  # `__x__` spellings are read without the dashes
_SYMBOL_ATTRS = {"section", "weak", "weakref", "alias", "ifunc", "symver"}
_PRAGMA_ESCAPES = re.compile(r"^\s*(?:weak|redefine_extname)\b")
# Macros that decide what is device code or what a name means to the compiler.
_NO_REDEFINE = {"__device__", "__global__", "__host__", "__CUDA_ARCH__", "__CUDACC__", "__NVCC__",
                "__attribute__", "_Pragma"} | _ASM  # fmt: skip
# Tensor methods that compute: refused on any receiver (no other C++ type has them) ...
_STRONG_METHODS = {
    "matmul", "mm", "bmm", "mv", "addmm", "addmm_", "addmv", "baddbmm", "addbmm", "relu", "relu_", "gelu",
    "silu", "sigmoid", "sigmoid_", "softmax", "log_softmax", "clamp_min", "clamp_min_", "clamp_max",
    "clamp_max_", "clamp_", "amax", "amin", "argmax", "argmin", "cumsum", "cumprod", "masked_fill",
    "masked_fill_", "index_select", "index_add", "index_add_", "index_put_", "scatter_add", "scatter_add_",
    "topk", "conv1d", "conv2d", "conv3d", "layer_norm", "batch_norm", "logsumexp", "rsqrt", "reciprocal",
    "addcmul", "addcdiv", "einsum", "tanh_", "exp_", "mul_", "add_", "sub_", "div_", "pow_", "neg_",
    "square", "erf", "lerp", "maximum", "minimum", "outer", "kron", "sum_to_size",
}  # fmt: skip
# ... and these only on a receiver known to be a tensor (a `vector.max()` is no ATen call).
_WEAK_METHODS = {
    "add", "sub", "mul", "div", "pow", "neg", "abs", "exp", "log", "sqrt", "tanh", "sin", "cos", "sum",
    "mean", "max", "min", "prod", "norm", "var", "std", "clamp", "clip", "where", "sort", "argsort",
    "index", "gather", "scatter", "any", "all", "eq", "ne", "gt", "lt", "ge", "le", "floor", "ceil",
    "round", "sign", "repeat", "repeat_interleave", "flip", "roll", "tril", "triu", "masked_select",
    "nonzero", "unique", "linear", "dropout", "fmod", "remainder", "expm1", "log1p", "cross", "dot", "diag",
    "cat", "stack",
}  # fmt: skip
# Free functions ATen defines for tensors: unqualified calls reach them by argument-dependent lookup.
_ATEN_FREE = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "relu", "relu_", "gelu", "silu", "softmax", "log_softmax",
    "sigmoid", "conv1d", "conv2d", "conv3d", "linear", "layer_norm", "batch_norm", "group_norm", "einsum",
    "cumsum", "logsumexp", "clamp_min", "masked_fill", "index_select", "topk", "embedding", "dropout",
    "scaled_dot_product_attention", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "sum", "mean", "amax",
    "amin", "argmax", "argmin", "cat", "stack", "where", "outer", "mv", "addmv", "addr", "addbmm",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "instance_norm", "rms_norm", "cdist",
    "pdist", "bilinear", "tensordot", "chain_matmul", "nll_loss", "cross_entropy_loss", "mse_loss",
    "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "kl_div", "hardtanh", "leaky_relu",
    "elu", "selu", "celu", "softplus", "hardswish", "hardsigmoid", "mish", "prelu", "glu",
    "cosine_similarity", "pairwise_distance", "max_pool1d", "max_pool3d", "avg_pool1d", "avg_pool3d",
    "adaptive_max_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool3d", "upsample_nearest2d",
    "upsample_bilinear2d", "pixel_shuffle", "embedding_bag",
}  # fmt: skip
_ATEN_FAMILIES = ("native_", "linalg_", "special_", "fft_", "nested_", "sparse_", "quantize_", "fbgemm_",
                  "mkldnn_", "miopen_", "slow_conv", "thnn_", "upsample_", "cudnn_")  # fmt: skip
_INTRINSICS = ("_mm", "_cvt", "_bit", "_tzcnt", "_lzcnt", "_popcnt", "_pdep", "_pext", "_bzhi", "_bextr",
               "_bls", "_load", "_store", "_xbegin", "_xend", "_xabort", "_xtest", "_addcarry", "_subborrow",
               "_mulx", "_cast", "_rot", "_bswap")  # fmt: skip
# Unqualified callees that take tensors without computing on them (std utilities, `TORCH_CHECK`-style macros).
_ADL_OK = {"move", "forward", "swap", "make_tuple", "make_pair", "tie", "get", "ref", "cref", "make_shared",
           "make_unique", "forward_as_tuple", "addressof", "as_const", "exchange", "cast", "defined",
           "static_assert", "assert", "printf"}  # fmt: skip
_KEYWORDS = {"return", "case", "else", "goto", "delete", "throw", "new", "sizeof", "co_return", "co_yield",
             "typedef", "using", "namespace", "do", "operator", "alignof", "decltype"}  # fmt: skip
_CONTROL = {"if", "while", "for", "switch", "catch", "return", "sizeof", "alignof", "decltype", "typeid",
            "noexcept", "static_assert", "alignas", "__attribute__", "__launch_bounds__", "__align__",
            "throw", "defined", "requires"}  # fmt: skip
_CONTAINERS = {"Tensor", "unordered_map", "map", "unordered_set", "set", "vector", "deque", "list",
               "shared_ptr", "unique_ptr", "TensorList", "MaybeOwned"}  # fmt: skip
_TENSOR_RETURNING = {"contiguous", "view", "reshape", "to", "clone", "transpose", "t", "permute",
                     "unsqueeze", "squeeze", "flatten", "expand", "narrow", "select", "slice", "detach",
                     "cuda", "cpu"}  # fmt: skip
_ALLOC = {"empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
          "empty_strided", "from_blob"}  # fmt: skip
_ARITH = {"+", "-", "*", "/", "%", "+=", "-=", "*=", "/=", "%=", "&", "|", "^", "&=", "|=", "^="}
_NOT_TYPE = {"const", "volatile", "__restrict__", "constexpr", "inline", "extern"}
_ESCAPE_WHY = "reaches outside the kernel (processes, files, environment, threads, timers, side streams)"
_ATEN_WHY = "computes in ATen instead of the solution's kernel"
_PY_WHY = "is the Python C API: it runs Python that the checks never see"
_SYMBOL_WHY = "changes which symbol or section code lands in (load-time hooks, interposed functions)"
_LOAD_WHY = "runs code when the library loads"
# -- namespace-scope objects: what their declarations look like --------------------------------------------
_TYPE_WORDS = {"int", "float", "double", "char", "bool", "long", "short", "unsigned", "signed", "void",
               "auto", "wchar_t", "char8_t", "char16_t", "char32_t", "size_t", "ptrdiff_t", "int8_t",
               "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "intptr_t",
               "uintptr_t", "half", "__half", "__nv_bfloat16", "dim3", "float2", "float4", "int2",
               "int4"}  # fmt: skip
_SPECIFIERS = {"static", "inline", "const", "volatile", "extern", "thread_local", "mutable", "register",
               "constinit", "__restrict__", "__restrict", "typename", "struct", "class", "union",
               "__forceinline__", "__inline__", "__noinline__", "__host__", "__global__"}  # fmt: skip
_NO_RUNTIME_INIT = {"typedef", "using", "namespace", "friend", "static_assert", "concept", "operator", "enum",
                    "constexpr", "consteval", "__device__", "__constant__", "__shared__", "__managed__",
                    "requires"} | _ASM  # fmt: skip
_DECORATIONS = {"__attribute__", "__attribute", "alignas", "__align__", "__declspec",
                "__launch_bounds__"} | _ASM  # fmt: skip
_CASTS = {"static_cast", "reinterpret_cast", "const_cast", "dynamic_cast", "bit_cast"}
# Calls that run none of the solution's code: casts, math, limits, constructors of plain CUDA types.
_PURE_CALLS = _TYPE_WORDS | _CASTS | {
    "sizeof", "alignof", "decltype", "noexcept", "typeid", "sqrt", "sqrtf", "exp", "expf", "exp2", "exp2f",
    "log", "logf", "log2", "log2f", "pow", "powf", "fabs", "fabsf", "abs", "tanh", "tanhf", "erf", "erff",
    "sin", "sinf", "cos", "cosf", "ceil", "ceilf", "floor", "floorf", "round", "roundf", "fmin", "fminf",
    "fmax", "fmaxf", "min", "max", "lowest", "epsilon", "infinity", "quiet_NaN", "denorm_min",
    "make_float2", "make_float4", "make_int2", "make_int4", "float3", "int3", "make_float3", "make_int3",
}  # fmt: skip
_MACRO = re.compile(r"[A-Z][A-Z0-9_]*")
_DECLARATOR_NEXT = {"=", "(", "{", "[", ";", ","}
_VALUE_HOLDERS = {"array", "pair", "tuple", "variant"}  # hold their arguments by value, default-constructed


@dataclass(frozen=True)
class Tok:
    kind: str  # "id", "num", "op", "lit" (its text is dropped), "include", "pp" (a directive's name), "ppend"
    text: str
    line: int
    value: str = field(default="", compare=False)  # a literal as written: read in `_Pragma("...")` only


_END = Tok("op", "", 0)


def join_splices(text: str) -> str:
    """Backslash-newline splices joined, as the compiler does before anything else; the removed newlines
    are put back after the logical line, so every later line keeps its number."""
    if "\\" not in text:
        return text
    lines = text.split("\n")
    out: list[str] = []
    owed = 0
    for k, line in enumerate(lines):
        last = k == len(lines) - 1
        m = _SPLICE_END.search(line)
        if m and not last:
            out.append(line[: m.start()])
            owed += 1
        else:
            out.append(line + ("" if last else "\n") + "\n" * owed)
            owed = 0
    return "".join(out)


def decode_ucns(word: str) -> str:
    """`a\\u0074` is `at` to the compiler: universal character names decoded."""
    return _UCN_RE.sub(lambda m: _ucn_char(m.group()), word)


def _ucn_char(ucn: str) -> str:
    code = int(ucn[2:], 16)
    return chr(code) if code <= 0x10FFFF else "\ufffd"


def _skip(text: str, i: int) -> int:
    """The end of whitespace or a comment starting at i; -1 when none starts there."""
    if text[i] in " \t\r\f\v":
        return i + 1
    if text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if text.startswith("/*", i):
        end = text.find("*/", i + 2)
        return len(text) if end < 0 else end + 2
    return -1


def literal_end(text: str, q: int, raw: bool) -> int:
    """The end of a literal whose opening quote is at q; an unterminated one ends at the line's end."""
    if raw:
        paren = text.find("(", q, q + 18)
        closing = ")" + text[q + 1 : paren] + '"'
        end = text.find(closing, paren) if paren >= 0 else -1
        if paren >= 0:
            return len(text) if end < 0 else end + len(closing)
    j, quote = q + 1, text[q]
    while j < len(text) and text[j] not in (quote, "\n"):
        j += 2 if text[j] == "\\" else 1
    return min(j + 1, len(text))


def _token(text: str, i: int, line: int) -> tuple[Tok, int]:
    """The token starting at i (not whitespace or a comment) and its end."""
    m = ID_RE.match(text, i)
    if m and m.group() in STRING_PREFIXES and m.end() < len(text) and text[m.end()] in "\"'":
        end = literal_end(text, m.end(), m.group().endswith("R"))
        return Tok("lit", "", line, text[m.end() : end]), end
    if m:
        word = m.group()
        return Tok("id", decode_ucns(word) if "\\" in word else word, line), m.end()
    if text[i] in "\"'":
        end = literal_end(text, i, False)
        return Tok("lit", "", line, text[i:end]), end
    m = NUMBER_RE.match(text, i)
    if m:
        return Tok("num", m.group(), line), m.end()
    if text.startswith("<::", i) and text[i + 3 : i + 4] not in (":", ">"):
        return Tok("op", "<", line), i + 1  # `vector<::x>`: C++11 reads `<` `::`, not the digraph `<:`
    op = next((o for o in _OPS if text.startswith(o, i)), text[i])
    return Tok("op", _DIGRAPHS.get(op, op), line), i + len(op)


def _directive(text: str, i: int, line: int) -> tuple[list[Tok], int, int, bool]:
    """A directive starting with `#` (or `%:`) at i: its tokens, its end, the line after it, and whether
    the rest of its line is still to be read as tokens. Line markers (`# 12 "f"`, `#line 12`) set the line
    of the next line; `#include`-like directives are one token."""
    m = _DIRECTIVE.match(text, i)
    assert m is not None  # the pattern's tail is optional: `#` alone matches
    number = m.group(1) or m.group(2)
    if number:
        eol = text.find("\n", m.end())
        return [], len(text) if eol < 0 else eol, min(int(number[:10]), 10**9) - 1, False
    line_after = line + text.count("\n", i, m.end())
    if m.group(3):
        return [Tok("include", m.group(4).strip().strip('<>"').strip(), line)], m.end(), line_after, False
    return [Tok("pp", m.group(5) or "", line)], m.end(), line_after, True


def tokenize(text: str) -> Iterator[Tok]:
    """C/C++/CUDA tokens with 1-based lines; comments and the contents of literals are dropped. A directive
    is a `pp` token (its name), the tokens of its line, then `ppend`."""
    text = join_splices(text)
    i, line, bol, directive, n = 0, 1, True, False, len(text)
    while i < n:
        if text[i] == "\n":
            if directive:
                yield Tok("ppend", "", line)
            i, line, bol, directive = i + 1, line + 1, True, False
            continue
        end = _skip(text, i)
        if end >= 0:
            line += text.count("\n", i, end)
            i = end
            continue
        if bol and (text[i] == "#" or text.startswith("%:", i)):
            toks, end, line, directive = _directive(text, i, line)
            yield from toks
        else:
            tok, end = _token(text, i, line)
            yield tok
            line += text.count("\n", i, end)
        bol = False
        i = end
    if directive:
        yield Tok("ppend", "", line)


@dataclass
class _Scope:
    kind: str  # "ns" (file or namespace), "class", "fn" (function or block), "init" (braced initializer)
    names: dict[str, bool] = field(default_factory=dict)  # declared name -> is a tensor
    path: tuple[str, ...] = ()  # the namespace this scope is in
    opened: tuple[tuple[str, ...], ...] = ()  # namespaces whose names are found unqualified here
    device: bool = False  # in a __device__ / __global__ function
    all_ns: bool = True  # this scope and every enclosing one are namespaces
    start: int = 0  # index of the first token of the scope's current statement
    lambda_body: bool = False  # a lambda's body: the statement around it goes on after it


@dataclass(frozen=True)
class Program:
    """What all the sources of one solution declare, seen by the scan of each file."""

    declared: set[str]  # functions, macros and lambdas
    types: set[str]  # classes, enums, namespaces, aliases and template parameters
    code_classes: set[str]  # classes whose construction or destruction runs the solution's code


class NativeScan:
    """One pass over one file's tokens."""

    def __init__(self, fname: str, toks: list[Tok], allow_vendor: bool, program: Program) -> None:
        self.f, self.t, self.allow_vendor, self.prog = fname, toks, allow_vendor, program
        self.declared = program.declared
        self.cpp_only = fname.endswith((".cpp", ".cc", ".cxx", ".c"))  # g++ builds it: no device code
        self.hits: list[Hit] = []
        self.scopes = [_Scope("ns")]
        self.pending: dict[str, bool] = {}  # parameters, waiting for the function body's brace
        self.aliases: dict[str, list[list[str]]] = {}  # `K`, `q::K` -> what namespace aliases / macros name
        self.ns_using: dict[str, list[list[str]]] = {}  # `q` -> namespaces `using namespace` opened inside q
        self.paren = 0
        self.arch: list[str] = []  # per open `#if`: "device" (__CUDA_ARCH__), "host" (negated) or "any"
        self.in_pp = _directive_mask(toks)

    def hit(self, rule: str, line: int, why: str) -> None:
        self.hits.append((rule, self.f, line, why))

    def tok(self, i: int) -> Tok:
        return self.t[i] if 0 <= i < len(self.t) else _END

    def run(self) -> list[Hit]:
        for i, tk in enumerate(self.t):
            if len(self.hits) >= MAX_HITS:
                break
            if tk.kind == "include":
                self.include(tk)
            elif tk.kind == "pp":
                self.directive(i, tk)
            elif tk.kind == "op":
                self.op(i, tk)
            elif tk.kind == "id":
                self.ident(i, tk)
        return self.hits

    # -- scopes and operators ------------------------------------------------------------------------
    def op(self, i: int, tk: Tok) -> None:
        if tk.text == "{":
            self.open_scope(i)
        elif tk.text == "}":
            self.close_scope(i)
        elif tk.text == ";" and self.paren == 0:
            self.end_statement(i)
            self.pending = {}
        elif tk.text in ("(", ")"):
            self.paren = max(0, self.paren + (1 if tk.text == "(" else -1))
        elif tk.text == "##":
            self.hit(
                "native-escape", tk.line, "token pasting (`##`) builds names that the checks cannot read"
            )
        elif tk.text == "[" and self.tok(i + 1).text == "[":
            self.risky_attributes(_group_words(self.t, i + 1, "[", "]"), tk.line)
        elif tk.text in _ARITH:
            self.tensor_operator(i, tk)

    def open_scope(self, i: int) -> None:
        parent, kind = self.scopes[-1], self.brace_kind(i)
        scope = _Scope(kind, self.pending, parent.path, parent.opened, parent.device, parent.all_ns, i + 1)
        scope.all_ns = parent.all_ns and kind == "ns"  # `extern "C" {` and namespaces, all the way out
        if kind == "ns":
            names = self.namespace_names(i)
            if names and len(parent.opened) < 64:  # bounded: each open namespace is one more meaning per name
                scope.path = (*parent.path, *names)
                scope.opened = (*parent.opened, scope.path)
        elif kind == "fn":
            scope.device = parent.device or self.device_head(i)
            scope.lambda_body = _lambda_brace(self.t, i)
        self.scopes.append(scope)
        self.pending = {}

    def close_scope(self, i: int) -> None:
        if len(self.scopes) > 1:
            closed = self.scopes.pop()
            if closed.kind in ("fn", "ns") and not closed.lambda_body:
                self.scopes[-1].start = i + 1  # a function or namespace body ends the statement it was in
        self.pending = {}

    def end_statement(self, i: int) -> None:
        """A `;` at the scope's level: namespace-scope objects whose initialisation runs code are refused."""
        scope = self.scopes[-1]
        start, scope.start = scope.start, i + 1
        if not scope.all_ns and (scope.kind != "class" or self.in_fn()):
            return
        stmt = [t for k, t in enumerate(self.t[start:i], start) if not self.in_pp[k]]
        inline_member = scope.kind == "class" and {"static", "inline"} <= _head_words(stmt)
        if stmt and (scope.all_ns or inline_member):
            why = load_time_code(stmt, self.prog.code_classes, self.prog.types)
            if why:
                self.hit("native-escape", stmt[0].line, why)

    def brace_kind(self, i: int) -> str:
        prev = self.tok(i - 1)
        if prev.kind == "lit" and self.tok(i - 2).text == "extern":  # extern "C" {
            return "ns" if self.in_ns() else "fn"
        if prev.text in ("=", ",", "(", "return", "{", "[") or prev.kind == "lit":
            return "init"
        j = i - 1
        while j >= 0 and self.t[j].text not in (";", "{", "}", ")") and self.t[j].kind not in _BOUNDARY:
            if self.t[j].text == "namespace":
                return "ns" if self.in_ns() else "fn"
            if self.t[j].text in ("struct", "class", "union", "enum"):
                return "class"
            j -= 1
        return "init" if _brace_initialized(prev, self.tok(i - 2)) else "fn"

    def namespace_names(self, i: int) -> list[str]:
        """`namespace at::native {` -> ["at", "native"]; [] for `namespace {` and `extern "C" {`."""
        j = i - 1
        while j >= 0 and self.t[j].text != "namespace" and self.t[j].text not in (";", "{", "}"):
            j -= 1
        if self.tok(j).text != "namespace":
            return []
        return [t.text for t in self.t[j + 1 : i] if t.kind == "id" and t.text != "inline"]

    def device_head(self, i: int) -> bool:
        """The function (or lambda) whose body opens at i is device code: `__device__` or `__global__`,
        not also `__host__` (that one is compiled for the host too)."""
        words: set[str] = set()
        j = i - 1
        while j >= 0 and i - j < 400 and self.t[j].text not in (";", "{", "}"):
            if self.t[j].kind in _BOUNDARY:
                break
            words.add(self.t[j].text)
            j -= 1
        return bool(words & {"__device__", "__global__"}) and "__host__" not in words

    def in_ns(self) -> bool:
        return self.scopes[-1].all_ns

    def in_fn(self) -> bool:
        return any(s.kind in ("fn", "init") for s in self.scopes)

    def in_device(self) -> bool:
        return self.scopes[-1].device or "device" in self.arch

    def opened_root(self, roots: set[str]) -> bool:
        """A namespace with one of these roots is open here (`using namespace at;`, `namespace at {`)."""
        return any(p and p[0] in roots for p in self.scopes[-1].opened)

    def visible_scopes(self) -> list[_Scope]:
        """The innermost 64 scopes and the file's: name lookups stay bounded on hostile nesting."""
        return self.scopes if len(self.scopes) <= 65 else [self.scopes[0], *self.scopes[-64:]]

    def is_tensor(self, name: str) -> bool:
        for scope in reversed(self.visible_scopes()):
            if name in scope.names:
                return scope.names[name]
        return self.pending.get(name, False)

    def is_variable(self, name: str) -> bool:
        """Declared as a variable or parameter here."""
        return name in self.pending or any(name in s.names for s in self.visible_scopes())

    def tensor_operator(self, i: int, tk: Tok) -> None:
        """`x + y`, `x * 2`, `-x` on a tensor variable: ATen's operator overloads do the work."""
        left, right = self.tok(i - 1), self.tok(i + 1)
        lhs = (
            left.kind == "id" and self.is_tensor(left.text) and self.tok(i - 2).text not in (".", "->", "::")
        )
        rhs = (
            right.kind == "id"
            and self.is_tensor(right.text)
            and self.tok(i + 2).text not in (".", "->", "(", "::", "[")
            and tk.text in ("+", "-", "*", "/", "%")
            and (tk.text != "*" or _is_value(left))  # `*p` dereferences
        )
        if lhs or rhs:
            self.hit(
                "aten-compute",
                tk.line,
                f"`{tk.text}` on tensor `{left.text if lhs else right.text}` {_ATEN_WHY}",
            )

    # -- preprocessor directives ---------------------------------------------------------------------
    def directive(self, i: int, tk: Tok) -> None:
        words = _directive_words(self.t, i)
        if tk.text == "pragma" and _PRAGMA_ESCAPES.match(" ".join(words)):
            self.hit("native-escape", tk.line, f"`#pragma {' '.join(words[:2])}` {_SYMBOL_WHY}")
        elif tk.text == "define" and words:
            self.define(i, words[0])
        elif tk.text in ("if", "ifdef", "ifndef", "elif", "else", "endif"):
            self.conditional(tk.text, words)

    def define(self, i: int, name: str) -> None:
        if name in _NO_REDEFINE:
            self.hit("native-escape", self.t[i].line, f"`#define {name}` changes what is device code or asm")
        elif self.tok(i + 2).kind == "id":  # `#define KNS at::cpu`: an object-like macro naming a namespace
            parts, end = self.chain_at(i + 2)
            if self.tok(end).kind == "ppend":  # every definition counts: `#if` branches are not read here
                self.add_alias(name, self.resolve(parts))

    def conditional(self, name: str, words: list[str]) -> None:
        """Track `#if __CUDA_ARCH__` regions: what they hold is compiled for the device only."""
        if name in ("if", "ifdef", "ifndef") and len(self.arch) < 1000:
            self.arch.append(_arch_branch(name, words))
        elif name == "elif" and self.arch:
            self.arch[-1] = _arch_branch("if", words)
        elif name == "else" and self.arch:
            self.arch[-1] = {"device": "host", "host": "device"}.get(self.arch[-1], "any")
        elif name == "endif" and self.arch:
            self.arch.pop()

    # -- identifiers -------------------------------------------------------------------------------
    def ident(self, i: int, tk: Tok) -> None:
        prev, nxt, word = self.tok(i - 1), self.tok(i + 1), tk.text
        if prev.text == "::" and _scope_name(self.tok(i - 2)):
            return  # part of a chain, read from its first name
        if word in _BARE_ROOTS and self.bare_namespace(i):
            why = "names a namespace outside a qualified name (a macro argument?): what it builds is unread"
            self.hit("native-escape", tk.line, f"`{word}` {why}")
        if prev.text not in (".", "->") and self.name_escape(i, word):
            return
        if nxt.text == "::" and _scope_name(tk):
            self.qualified(i)
        elif self.vendor(word, tk.line):
            pass
        elif prev.text in (".", "->"):
            self.method(i, word)
        else:
            self.plain(i, prev, nxt, word)

    def name_escape(self, i: int, word: str) -> bool:
        """Names refused wherever they appear; True when one was."""
        line = self.t[i].line
        if word in _NAME_ESCAPES:
            self.hit("native-escape", line, f"`{word}` {_ESCAPE_WHY}")
        elif _is_python_api(word):
            self.hit("native-escape", line, f"`{word}` {_PY_WHY}")
        elif word.startswith("_Z") and len(word) > 2:
            why = "is a mangled C++ symbol: it reaches a function by its linker name, past the name checks"
            self.hit("native-escape", line, f"`{word}` {why}")
        elif word in _ASM:
            self.inline_asm(line)
        elif word in ("__attribute__", "__attribute"):
            self.risky_attributes(_group_words(self.t, i + 1, "(", ")"), line)
        else:
            return False
        return True

    def inline_asm(self, line: int) -> None:
        if self.in_device() and not self.cpp_only:
            return  # inline PTX in device code
        where = "a C++ file" if self.cpp_only else "host code"
        why = "can read cycle counters, make system calls or rename symbols"
        self.hit("native-escape", line, f"inline assembly (`asm`) in {where} {why}")

    def risky_attributes(self, words: set[str], line: int) -> None:
        names = {w.strip("_") for w in words}
        if names & _LOAD_ATTRS:
            self.hit("native-escape", line, f"attribute `{min(names & _LOAD_ATTRS)}` {_LOAD_WHY}")
        if names & _SYMBOL_ATTRS:
            self.hit("native-escape", line, f"attribute `{min(names & _SYMBOL_ATTRS)}` {_SYMBOL_WHY}")

    def plain(self, i: int, prev: Tok, nxt: Tok, word: str) -> None:
        line = self.t[i].line
        if word == "namespace" and self.tok(i + 2).text == "=" and self.tok(i + 1).kind == "id":
            self.add_alias(self.t[i + 1].text, self.resolve(self.chain_at(i + 3)[0]))
        elif word == "using" and nxt.text == "namespace":
            self.using_directive(i)
        elif word in ("static", "thread_local"):
            self.static_decl(i)
        elif word == "_Pragma" and _PRAGMA_ESCAPES.match(self.tok(i + 2).value.strip("\"'")):
            self.hit("native-escape", line, f"`_Pragma({self.tok(i + 2).value})` {_SYMBOL_WHY}")
        if word in _ESCAPE_TYPES or (word in _ESCAPE_CALLS and (nxt.text == "(" or self.value_use(i))):
            self.hit("native-escape", line, f"`{word}` {_ESCAPE_WHY}")
        elif self.opened_escape(i, word, nxt):
            self.hit("native-escape", line, f"`{word}` (through `using namespace`) {_ESCAPE_WHY}")
        self.unqualified_call(i, prev, nxt, word)
        self.declaration(i)

    def opened_escape(self, i: int, word: str, nxt: Tok) -> bool:
        """`thread t(f);`, `chrono::steady_clock` under `using namespace std;`, `exec(...)` under
        `using namespace pybind11;` (a variable of that name is no escape)."""
        if self.is_variable(word) or self.tok(i - 1).text in ("::", ".", "->"):
            return False
        used = nxt.kind == "id" or nxt.text in ("(", "{", "<", "::")
        std = word in _STD_ESCAPES and used and self.opened_root({"std"})
        return std or (word in _PY_ESCAPES and nxt.text == "(" and self.opened_root({"py", "pybind11"}))

    def value_use(self, i: int) -> bool:
        """`&write`, `= system;`, `f(popen)`: an escape function taken as a value, where no variable of
        that name is declared."""
        k = i - 2 if self.tok(i - 1).text == "::" else i - 1  # `::system` is the global one
        prev, nxt = self.tok(k), self.tok(i + 1)
        if self.is_variable(self.t[i].text):
            return False
        address = prev.text == "&" and not _is_value(self.tok(k - 1))
        operand = prev.text in ("=", "(", ",", "return", "?") and nxt.text in (";", ",", ")")
        return address or operand

    def unqualified_call(self, i: int, prev: Tok, nxt: Tok, word: str) -> None:
        """`matmul(a, b)`, `_softmax(x, 1, false)`, `::mm(a, b)` (the global namespace, where `using namespace
        at;` put ATen's names): calls that name lookup takes into ATen."""
        if prev.text == "::":
            prev = self.tok(i - 2)
        if nxt.text != "(" or not _is_call_site(prev) or prev.text == "new" or not self.unknown_callee(word):
            return
        line = self.t[i].line
        if word in _ATEN_FREE:
            why = f"finds `at::{word}` by lookup: it {_ATEN_WHY}"
        elif self.opened_root(_TORCH_NS) and _aten_name(word) and not self.in_device():
            why = f"is found in ATen through `using namespace` / `namespace at {{`: it {_ATEN_WHY}"
        elif _adl_candidate(word) and self.tensor_argument(i + 1):
            why = f"on a tensor finds `at::{word}` by argument-dependent lookup: it {_ATEN_WHY}"
        else:
            return
        self.hit("aten-compute", line, f"`{word}(...)` {why}")

    def unknown_callee(self, word: str) -> bool:
        """Not something the sources define (a function, macro, lambda, type or variable)."""
        known = word in self.declared or word in self.prog.types or self.is_variable(word)
        return not known and word not in _CONTROL and word not in _KEYWORDS

    def tensor_argument(self, open_paren: int) -> bool:
        """One of the call's arguments is a tensor variable (`f(x, 2)`, `f(x.contiguous())`)."""
        depth = 0
        for j in range(open_paren, min(len(self.t), open_paren + 100)):
            t = self.t[j]
            depth += 1 if t.text == "(" else -1 if t.text == ")" else 0
            if depth <= 0:
                return False
            if depth == 1 and t.kind == "id" and self.is_tensor(t.text) and self.t[j - 1].text in ("(", ","):
                after, method = self.tok(j + 1).text, self.tok(j + 2).text
                if after in (",", ")") or (after == "." and method in _TENSOR_RETURNING):
                    return True
        return False

    def include(self, tk: Tok) -> None:
        base = tk.text.rsplit("/", 1)[-1]
        if base.lower().startswith(_VENDOR_PREFIXES[:6]) and not self.allow_vendor:
            self.hit(
                "vendor-library",
                tk.line,
                f"`#include <{tk.text}>`: this task does not allow vendor libraries",
            )

    def vendor(self, word: str, line: int) -> bool:
        if not (word.startswith(_VENDOR_PREFIXES) or word in _VENDOR_NAMES):
            return False
        if not self.allow_vendor:
            self.hit(
                "vendor-library", line, f"`{word}` is a vendor library (cuBLAS, cuDNN, ...), not allowed here"
            )
        return True

    # -- qualified names and namespaces --------------------------------------------------------------
    def chain_at(self, j: int) -> tuple[list[str], int]:
        """The names of `a::b::c` starting at j (a leading `::` skipped) and the index after it."""
        if self.tok(j).text == "::":
            j += 1
        parts: list[str] = []
        while self.tok(j).kind == "id" and len(parts) < 64:
            parts.append(self.t[j].text)
            if self.tok(j + 1).text != "::" or self.tok(j + 2).kind != "id":
                return parts, j + 1
            j += 2
        return parts, j

    def resolve(self, parts: list[str]) -> list[list[str]]:
        """What a qualified name may mean here (bounded, never empty): as written with aliases expanded, then
        through the namespaces open here or inside a namespace it names (`cpu::mm` under `using namespace
        at;`, and `q::cpu::mm` after `namespace q { using namespace at; }`, are `at::cpu::mm`)."""
        out: list[list[str]] = []
        for meaning in self.expand_aliases(parts):
            out += [meaning, *self.opened_meanings(meaning)]
        return out[:32] or [parts]

    def expand_aliases(self, parts: list[str]) -> list[list[str]]:
        meanings, done = [parts], []
        for _ in range(8):  # aliases of aliases, bounded
            expanded = []
            for meaning in meanings:
                targets = self.alias_targets(meaning)
                if targets:
                    expanded += targets
                else:
                    done.append(meaning)
            meanings = expanded[:16]
            if not meanings:
                break
        return (done + meanings)[:16]

    def alias_targets(self, parts: list[str]) -> list[list[str]]:
        """`K::mm` with `namespace K = at::cpu;` -> [`at::cpu::mm`]; [] when no prefix is an alias."""
        for k in range(len(parts), 0, -1):
            targets = self.aliases.get("::".join(parts[:k]))
            if targets:
                return [[*t, *parts[k:]] for t in targets]
        return []

    def opened_meanings(self, parts: list[str]) -> list[list[str]]:
        if not parts or parts[0] in _KNOWN_ROOTS:
            return []
        inside = [(k, self.ns_using.get("::".join(parts[:k]), [])) for k in range(1, len(parts))]
        out = [[*u, *parts[k:]] for k, opened in inside for u in opened]
        local = parts[0] in self.prog.types and parts[0] not in _ATEN_SUBNS
        libcu = parts[0] == "cuda" and len(parts) > 1 and parts[1] in _LIBCUDACXX
        return out if local or libcu else out + [[*p, *parts] for p in self.scopes[-1].opened if p]

    def add_alias(self, name: str, targets: list[list[str]]) -> None:
        """A namespace alias (`namespace K = at::cpu;`, also as `q::K` inside namespace q) or a macro naming
        a namespace; several definitions give several meanings."""
        path = self.scopes[-1].path
        for key in [name, "::".join([*path, name])] if path else [name]:
            known = self.aliases.setdefault(key, [])
            known += [t for t in targets if t and t not in known][: 8 - len(known)]

    def using_directive(self, i: int) -> None:
        parts, _ = self.chain_at(i + 2)
        scope = self.scopes[-1]
        meanings = [tuple(p) for p in self.resolve(parts)] if parts else []
        if len(scope.opened) < 64:  # bounded: each open namespace is one more meaning per name
            scope.opened = tuple(dict.fromkeys([*scope.opened, *meanings]))
        if scope.kind == "ns" and scope.path:
            opened = self.ns_using.setdefault("::".join(scope.path), [])
            opened += [list(m) for m in meanings if list(m) not in opened][: 8 - len(opened)]

    def bare_namespace(self, i: int) -> bool:
        """`at` not followed by `::` and not named by `namespace` / `using namespace` / an alias: a torch or
        std namespace handed around bare, as a macro argument (`M(at, ::cpu::mm)`) whose expansion builds a
        qualified name that the checks read nowhere (not even after cpp when M is defined under `#if`)."""
        if self.tok(i + 1).text == "::" or self.tok(i - 1).text in (".", "->"):
            return False
        j = i - 1
        if self.tok(j).text == "::":
            if _scope_name(self.tok(j - 1)) or self.tok(j - 1).text == ">":
                return False  # a member: `std::vector<int>::at`
            j -= 1
        return self.tok(j).text != "namespace" and not (
            self.tok(j).text == "=" and self.tok(j - 2).text == "namespace"
        )

    def qualified(self, i: int) -> None:
        parts, _ = self.chain_at(i)
        line, name = self.t[i].line, "::".join(parts)
        if any([self.vendor(p, line) for p in parts]):
            return
        for full in self.resolve(parts):
            found = _chain_finding(full)
            if found:
                shown = f"`{name}`" if full == parts else f"`{name}` (`{'::'.join(full)}`)"
                self.hit(found[0], line, f"{shown} {found[1]}")
                return

    def method(self, i: int, word: str) -> None:
        if self.tok(i + 1).text not in ("(", "<"):
            return
        base, recv = word.removesuffix("_out"), self.tok(i - 2)
        known = (
            self.returns_tensor(i - 2)
            if recv.text == ")"
            else recv.kind == "id" and self.is_tensor(recv.text)
        )
        if base in _STRONG_METHODS or (base in _WEAK_METHODS and known):
            self.hit("aten-compute", self.t[i].line, f"tensor method `.{word}()` {_ATEN_WHY}")
        elif word == "attr" and self.tok(i + 1).text == "(":
            self.hit("native-escape", self.t[i].line, "`.attr(...)` reaches Python objects by name")

    def returns_tensor(self, close: int) -> bool:
        """Whether the call ending at `close` returns a tensor: `x.contiguous()`, `torch::empty(...)`."""
        depth, j = 0, close
        while j >= 0:
            depth += {")": 1, "(": -1}.get(self.t[j].text, 0)
            if depth == 0:
                break
            j -= 1
        name, before = self.tok(j - 1), self.tok(j - 2)
        if before.text == ".":
            return name.text in _TENSOR_RETURNING
        return before.text == "::" and name.text in _ALLOC

    # -- declarations ------------------------------------------------------------------------------
    def declaration(self, i: int) -> None:
        """Record `T name` declarations (is T a tensor?); refuse tensors and containers at namespace scope."""
        prev, nxt, name = self.tok(i - 1), self.tok(i + 1), self.t[i].text
        typed = (prev.kind == "id" and prev.text not in _KEYWORDS) or prev.text in ("*", "&", "&&", ">")
        if nxt.text not in ("=", ";", ",", ")", "[", "{", ":") or name in _KEYWORDS or not typed:
            return
        types = self.type_words(i - 1)
        if not types:
            return
        (self.pending if self.paren else self.scopes[-1].names)[name] = "Tensor" in types or (
            "auto" in types and self.auto_tensor(i)
        )
        if self.in_ns() and not self.paren and types & _CONTAINERS and "static" not in types:
            why = "holds tensors or a container at namespace scope, where it outlives a call"
            self.hit("native-cache", self.t[i].line, f"`{name}` {why}")

    def type_words(self, j: int) -> set[str]:
        """The identifiers of the type before a declared name; empty when it is an expression instead."""
        words: set[str] = set()
        depth = 0
        while j >= 0:
            t = self.t[j]
            if t.text in (">", ">>"):
                depth += len(t.text)
            elif t.text == "<" and depth == 0:
                break
            elif t.text == "<":
                depth -= 1
            elif (
                t.text in (";", "{", "}", "(", ")", "=")
                or t.kind in _BOUNDARY
                or (t.text == "," and not depth)
            ):
                break
            elif t.kind in ("op", "num", "lit") and t.text not in ("::", "*", "&", "&&", ",") and not depth:
                return set()
            if t.kind == "id":
                words.add(t.text)
            j -= 1
        return words - _NOT_TYPE

    def auto_tensor(self, i: int) -> bool:
        """`auto y = torch::empty_like(x)`, `auto xc = x.contiguous()`, `auto a = x`: a tensor."""
        a, b, c = self.tok(i + 2), self.tok(i + 3), self.tok(i + 4)
        if self.tok(i + 1).text != "=":
            return False
        from_torch = a.text in _TORCH_NS and b.text == "::"
        tensor = a.kind == "id" and self.is_tensor(a.text)
        returned = b.text == "." and c.text in _TENSOR_RETURNING
        return from_torch or (tensor and (b.text in (";", ",") or returned))

    def static_decl(self, i: int) -> None:
        """`static` tensors, containers or pointers keep state across calls (a cache of results)."""
        j, types, pointer, depth = i + 1, set(), False, 0
        for j in range(i + 1, min(len(self.t), i + 40)):
            t = self.t[j]
            depth += {"<": 1, ">": -1}.get(t.text, 0)
            if depth == 0 and t.kind == "id" and self.tok(j + 1).text in ("=", ";", "(", "{", "[", ","):
                break
            if t.text in (";", "{", "}", "(", ")", "static"):
                return
            pointer = pointer or t.text in ("*", "**")
            types.add(t.text)
        else:
            return
        function = self.tok(j + 1).text == "(" and not self.in_fn()
        exempt = function or types & {"struct", "class", "constexpr", "__device__", "__constant__"}
        if not exempt and (types & _CONTAINERS or pointer):
            decl = _join(self.t[i : j + 1])
            self.hit(
                "native-cache", self.t[i].line, f"`{decl}` keeps tensors, containers or pointers across calls"
            )


_BOUNDARY = {"include", "pp", "ppend"}  # token kinds no declaration or statement reaches across


def _brace_initialized(name: Tok, before: Tok) -> bool:
    """`Foo x{...}`: the brace after `name` initializes a variable (not a function body, not `else {`)."""
    if name.kind != "id" or name.text in _KEYWORDS or name.text in _BODY_SPECIFIERS | {"else", "do"}:
        return False
    typed = before.kind == "id" and before.text not in _KEYWORDS and before.text not in _ACCESS
    return typed or before.text in (">", "*", "&", "&&")


_ACCESS = {"public", "private", "protected", "virtual"}


def _directive_mask(toks: list[Tok]) -> list[bool]:
    """For each token: is it part of a preprocessor directive (from its `pp` token to its `ppend`)?"""
    mask, inside = [], False
    for t in toks:
        inside = (inside or t.kind == "pp") and t.kind != "ppend"
        mask.append(inside or t.kind in ("ppend", "include"))
    return mask


def _directive_words(toks: list[Tok], i: int) -> list[str]:
    """The texts of a directive's tokens after its name (literals as written), up to 64."""
    out = []
    for t in toks[i + 1 : i + 65]:
        if t.kind == "ppend":
            break
        out.append(t.value if t.kind == "lit" else t.text)
    return out


def _arch_branch(name: str, words: list[str]) -> str:
    """`#ifdef __CUDA_ARCH__` / `#if __CUDA_ARCH__ >= 800`: "device"; negated: "host"; otherwise "any"."""
    if name in ("ifdef", "ifndef"):
        if words[:1] != ["__CUDA_ARCH__"]:
            return "any"
        return "device" if name == "ifdef" else "host"
    if "__CUDA_ARCH__" not in words or "||" in words:
        return "any"
    before = [w for w in words[: words.index("__CUDA_ARCH__")] if w not in ("(", "defined")]
    return "host" if before[-1:] == ["!"] else "device"


def _group_words(toks: list[Tok], start: int, opening: str, closing: str) -> set[str]:
    """The identifiers inside the bracket group opening at `start` (bounded)."""
    if start >= len(toks) or toks[start].text != opening:
        return set()
    words, depth = set(), 0
    for t in toks[start : start + 64]:
        depth += 1 if t.text == opening else -1 if t.text == closing else 0
        if t.kind == "id":
            words.add(t.text)
        if depth == 0:
            break
    return words


def _chain_finding(full: list[str]) -> tuple[str, str] | None:
    """The rule and reason a qualified name (namespaces resolved) is refused for, or None."""
    root, rest = full[0], set(full[1:])
    if root in ("py", "pybind11") and rest & _PY_ESCAPES:
        return "native-escape", "runs Python that the checks never see"
    if rest & (_ESCAPE_TYPES | _ESCAPE_CALLS | _NAME_ESCAPES) or (root == "std" and rest & _STD_ESCAPES):
        return "native-escape", _ESCAPE_WHY
    attrs = {p.strip("_") for p in rest}
    if root in ("gnu", "__gnu__") and attrs & (_LOAD_ATTRS | _SYMBOL_ATTRS):
        return "native-escape", _LOAD_WHY if attrs & _LOAD_ATTRS else _SYMBOL_WHY
    if root in _TORCH_NS:
        head = next((p for p in full[1:] if p not in _SKIP_NS), "")
        if head and head not in _ATEN_OK and not _is_constant(head):
            return "aten-compute", f"is outside the allowlist (allocation, metadata, streams): it {_ATEN_WHY}"
    return None


def _aten_name(word: str) -> bool:
    """An ATen function found unqualified once `at` is open: compute ops, `_softmax`-style internals."""
    if word in _ATEN_FREE or word in _STRONG_METHODS or word.startswith(_ATEN_FAMILIES):
        return True
    return bool(re.fullmatch(r"_[a-z][a-z0-9_]*", word)) and not word.startswith(_INTRINSICS)


def _adl_candidate(word: str) -> bool:
    """A callee that argument-dependent lookup could take into ATen: not a macro, std utility or builtin."""
    return not (_MACRO.fullmatch(word) or word in _ATEN_OK or word in _ADL_OK or word.startswith("__builtin"))


def _is_constant(word: str) -> bool:
    """`kFloat32`, `kCUDA`: dtype and device constants."""
    return len(word) > 1 and word[0] == "k" and word[1].isupper()


def _is_python_api(word: str) -> bool:
    api = word.startswith(("Py", "_Py")) and len(word) > 3 and (word[2] == "_" or word[2].isupper())
    return api and word not in _PY_TYPES_OK


def _scope_name(tok: Tok) -> bool:
    """It can name a namespace or class before `::` (`at` in `at::mm`, not `return` in `return ::f`)."""
    return tok.kind == "id" and tok.text not in _NOT_SCOPES


_NOT_SCOPES = _KEYWORDS | _SPECIFIERS | _TYPE_WORDS | _CONTROL
_BARE_ROOTS = _TORCH_NS | {"std", "pybind11"}


def _is_call_site(prev: Tok) -> bool:
    """A name after this token is used (called), not declared or qualified."""
    if prev.kind == "id":
        return prev.text in _KEYWORDS
    return prev.text not in (".", "->", "::", "*", "&", ">", "~")


def _is_value(tok: Tok) -> bool:
    """The token ends an operand (so a following `*` multiplies rather than dereferences)."""
    return tok.kind == "num" or tok.text in (")", "]") or (tok.kind == "id" and tok.text not in _KEYWORDS)


def _join(toks: list[Tok]) -> str:
    """Tokens back to readable text (`static std::unordered_map<const void*, torch::Tensor> cache`)."""
    out = ""
    for prev, t in zip([None, *toks], toks, strict=False):
        word = t.kind in ("id", "num")
        if prev is not None and word and (prev.kind in ("id", "num") or prev.text in (">", ",", "*", "&")):
            out += " "
        out += t.text
    return out


# -- namespace-scope objects whose initialisation runs code -------------------------------------------------


def _matching(toks: list[Tok], j: int, limit: int = 1 << 30) -> int:
    """The index of the bracket closing the one at j (len(toks) when unclosed within `limit` tokens)."""
    pairs = {"(": ")", "[": "]", "{": "}", "<": ">"}
    opening, depth = toks[j].text, 0
    closing = pairs[opening]
    for k in range(j, min(len(toks), j + limit)):
        text = toks[k].text
        if opening == "<" and text == ">>":
            depth -= 2
        else:
            depth += 1 if text == opening else -1 if text == closing else 0
        if depth <= 0:
            return k
        if opening == "<" and text in (";", "{", "}"):
            return k - 1  # a less-than, not a template argument list
    return len(toks)


def _strip_decorations(toks: list[Tok]) -> list[Tok]:
    """Without `__attribute__((...))`, `[[...]]`, `alignas(...)`, `__launch_bounds__(...)`, `asm(...)`."""
    out, j = [], 0
    while j < len(toks):
        t, nxt = toks[j], toks[j + 1].text if j + 1 < len(toks) else ""
        if t.text in _DECORATIONS and nxt == "(":
            j = _matching(toks, j + 1) + 1
        elif t.text == "[" and nxt == "[":
            j = _matching(toks, j) + 1
        else:
            out.append(t)
            j += 1
    return out


def _head_words(toks: list[Tok]) -> set[str]:
    """The identifiers before a declaration's initializer (its first `=`, `(` or `{` at depth 0)."""
    words = set()
    for t in toks:
        if t.text in ("=", "(", "{"):
            break
        if t.kind == "id":
            words.add(t.text)
    return words


def _class_specifier(toks: list[Tok], classes: set[str]) -> tuple[list[Tok], set[str]]:
    """`struct S {...} s` -> `S s` (with S among the code classes when its body runs code); `struct S s`
    -> `S s`."""
    for j, t in enumerate(toks):
        if t.text in ("=", "("):
            break
        if t.text not in ("struct", "class", "union"):
            continue
        k = j + 1
        name = toks[k].text if k < len(toks) and toks[k].kind == "id" else ""
        while k < len(toks) and toks[k].text not in ("{", ";", "=", "(", ","):
            k += 1
        if k >= len(toks) or toks[k].text != "{":
            return toks[:j] + toks[j + 1 :], classes
        close = _matching(toks, k)
        bases = {b.text for b in toks[j + 1 : k] if b.kind == "id"} - {name}
        runs = name in classes or _body_runs_code(name, bases, toks[k : close + 1], classes)
        stand_in = Tok("id", name or "<anonymous class>", t.line)
        return [*toks[:j], stand_in, *toks[close + 1 :]], classes | ({stand_in.text} if runs else set())
    return toks, classes


def load_time_code(stmt: list[Tok], classes: set[str], types: set[str]) -> str | None:
    """Why a namespace-scope declaration runs code when the library loads, or None: an object of a class
    whose constructor or destructor the sources define, or an initializer that calls a function, uses
    `new` or calls a lambda at once. Constants, `constexpr`, plain arrays and device globals pass."""
    toks = _strip_decorations(stmt)
    if toks[:1] and toks[0].text == "template":
        if len(toks) < 2 or toks[1].text != "<":
            return None  # an explicit instantiation or specialisation
        toks = toks[_matching(toks, 1) + 1 :]
    toks, classes = _class_specifier(toks, classes)
    head = _head_words(toks)
    if not toks or head & _NO_RUNTIME_INIT:
        return None
    found = _declarator(toks)
    if found is None:
        return _fallback_why(toks, classes)
    k, type_words, held = found
    if "extern" in head and (k + 1 >= len(toks) or toks[k + 1].text in (";", ",")):
        return None  # declared here, defined elsewhere
    class_type = type_words & classes
    if type_words & _VALUE_HOLDERS:  # `std::array<Init, 2> a;` constructs its elements
        class_type |= held & classes
    what = _declarators_code(toks, k, (class_type, held & classes), classes, types)
    if what is None:
        return None
    decl = _join(stmt[: min(len(stmt), 12)])
    return f"`{decl}` runs code when the library loads ({what}): namespace-scope objects must be plain data"


def _fallback_why(toks: list[Tok], classes: set[str]) -> str | None:
    """No simple declarator: `Evil(e);` declares an object of a code class, and `auto [a, b] = f();` or
    `float (*p)(int) = make();` have an initializer after a depth-0 `=`."""
    if len(toks) > 1 and toks[0].text in classes and toks[1].text == "(":
        return f"`{toks[0].text}(...)` declares an object whose constructor {_LOAD_WHY}"
    eq = next((j for j, t in enumerate(toks) if t.text == "="), None)
    what = _first_code(toks[eq + 1 :], classes) if eq is not None else None
    return f"`{_join(toks[:12])}` {_LOAD_WHY} ({what})" if what else None


def _declarator(toks: list[Tok]) -> tuple[int, set[str], set[str]] | None:
    """The index of the first declared name (`x` in `static const Foo<Bar> x = ...`), the words of its type
    outside template arguments (Foo) and inside them (Bar), or None."""
    seen_type, j, words, held = False, 0, set(), set()
    while j < len(toks):
        t = toks[j]
        nxt = toks[j + 1].text if j + 1 < len(toks) else ";"
        if t.kind == "id" and t.text not in _SPECIFIERS:
            if nxt == "::":
                j += 2
                continue
            words.add(t.text)
            if nxt == "<":
                close = _matching(toks, j + 1)
                held |= {a.text for a in toks[j + 2 : close] if a.kind == "id"}
                j = close + 1
                seen_type = True
                continue
            if seen_type and nxt in _DECLARATOR_NEXT and t.text not in _TYPE_WORDS:
                return j, words - {t.text}, held
            seen_type = True
        elif t.text not in ("*", "&", "&&", "::") and t.kind != "id":
            return None
        j += 1
    return None


def _declarators_code(
    toks: list[Tok], k: int, code_types: tuple[set[str], set[str]], classes: set[str], types: set[str]
) -> str | None:
    """What runs code among the declarators starting at k (`a = f(), b(g()), *c`), or None. `code_types`:
    the declared type's code classes, and those among its template arguments (constructed when the object
    is initialised from something: `std::optional<Init> o{std::in_place};`)."""
    class_type, held = code_types
    before = k - 1
    while before > 0 and toks[before].text in ("const", "volatile", "__restrict__"):  # `Init* const p`
        before -= 1
    pointer = before >= 0 and toks[before].text in ("*", "&", "&&")
    while k < len(toks):
        nxt = toks[k + 1].text if k + 1 < len(toks) else ";"
        j = k + 1
        while nxt == "[":  # arrays: their elements are constructed as plain objects are
            j = _matching(toks, j) + 1
            nxt = toks[j].text if j < len(toks) else ";"
        end = _declarator_end(toks, j)
        if nxt == "(" and _looks_like_params(toks[j + 1 : _matching(toks, j)], types):
            pass  # a function declaration
        elif class_type and not pointer:
            return f"the constructor of `{min(class_type)}`"
        elif held and not pointer and nxt in ("(", "{", "="):
            return f"the constructor of the `{min(held)}` it holds"
        elif nxt in ("(", "{", "="):
            what = _first_code(toks[j + 1 if nxt == "=" else j : end], classes)
            if what:
                return what
        following, pointer = _next_declarator(toks, end)
        if following is None:
            break
        k = following
    return None


def _declarator_end(toks: list[Tok], j: int) -> int:
    """The index of the `,` ending the declarator whose initializer starts at j (or len(toks))."""
    while j < len(toks):
        if toks[j].text in ("(", "[", "{"):
            j = _matching(toks, j) + 1
            continue
        if toks[j].text == ",":
            return j
        j += 1
    return len(toks)


def _next_declarator(toks: list[Tok], comma: int) -> tuple[int | None, bool]:
    """After `, * const b`: the index of `b` and whether it is a pointer or reference."""
    pointer = False
    for j in range(comma + 1, len(toks)):
        if toks[j].kind == "id" and toks[j].text not in _SPECIFIERS:
            return j, pointer
        if toks[j].text not in ("*", "&", "&&"):
            return None, False
        pointer = True
    return None, False


def _looks_like_params(args: list[Tok], types: set[str]) -> bool:
    """`(int a, const float* b = nullptr)` or `(Tensor)` is a parameter list; `(1, f())` or `(x)` with x no
    type are constructor arguments."""
    if not args:
        return True  # `Foo f();` declares a function
    groups: list[list[Tok]] = []
    current: list[Tok] = []
    depth = 0
    for t in args:
        depth += 1 if t.text in ("(", "[", "<") else -1 if t.text in (")", "]", ">") else 0
        if t.text == "," and depth == 0:
            groups.append(current)
            current = []
        else:
            current.append(t)
    groups.append(current)
    return all(_is_param(g, types) for g in groups)


def _is_param(group: list[Tok], types: set[str]) -> bool:
    eq = next((j for j, t in enumerate(group) if t.text == "="), len(group))
    decl = group[:eq]
    if [t.text for t in decl] == ["..."]:
        return True
    if any(t.kind in ("num", "lit") or t.text in ("+", "-", "/", ".", "->", "!", "?") for t in decl):
        return False
    ids = [t.text for t in decl if t.kind == "id" and t.text not in _SPECIFIERS]
    if len(ids) >= 2 or any(t.text in ("*", "&", "&&") for t in decl):
        return bool(ids)
    word = ids[0] if ids else ""
    return word in _TYPE_WORDS or word in types or word in _ATEN_OK or word.endswith("_t")


def _first_code(toks: list[Tok], classes: set[str]) -> str | None:
    """The first thing in an initializer that runs code at load time, described; None when nothing does."""
    j = 0
    while j < len(toks):
        t = toks[j]
        nxt = toks[j + 1].text if j + 1 < len(toks) else ""
        if t.text == "new":
            return "`new`"
        if t.kind == "num" and re.search(r"[0-9.]_[A-Za-z_]", t.text):
            return f"the literal operator of `{t.text}`"
        if t.kind == "id" and t.text in classes and nxt in ("(", "{"):
            return f"the constructor of `{t.text}`"
        if t.text == "[":
            end = _lambda_end(toks, j)
            if end is not None:
                if end < len(toks) and toks[end].text == "(":
                    return "a lambda called at once"
                j = end
                continue
        if t.text == "(" and j > 0 and _is_call(toks, j):
            return f"a call of `{_callee(toks, j)}(...)`"
        j += 1
    return None


def _callee(toks: list[Tok], j: int) -> str:
    """What the call at the `(` at j calls, for the message: `std::printf`, or `...` when not a name."""
    k = j - 1
    while k >= 2 and toks[k].kind == "id" and toks[k - 1].text == "::" and toks[k - 2].kind == "id":
        k -= 2
    return _join(toks[k:j]) if toks[j - 1].kind == "id" else "..."


def _is_call(toks: list[Tok], j: int) -> bool:
    """The `(` at j calls something (not a cast, math, a macro or a grouping)."""
    prev = toks[j - 1]
    if prev.kind == "id":
        name = prev.text
        pure = name in _PURE_CALLS or _MACRO.fullmatch(name) or name.startswith("__builtin_")
        return not pure or name.startswith("__builtin_ia32")
    if prev.text == ">":
        opening = next((k for k in range(j - 2, max(-1, j - 60), -1) if toks[k].text == "<"), None)
        return opening is None or opening == 0 or toks[opening - 1].text not in _CASTS
    if prev.text == ")":
        opening = next((k for k in range(j - 2, max(-1, j - 40), -1) if toks[k].text == "("), None)
        inside = toks[opening + 1 : j - 1] if opening is not None else []
        cast = bool(inside) and all(t.text in _TYPE_WORDS or t.text in ("*", "const") for t in inside)
        return not cast
    return prev.text in ("]", "}")


def _lambda_end(toks: list[Tok], j: int) -> int | None:
    """When the `[` at j starts a lambda: the index after its body; else None."""
    k = _matching(toks, j, 200) + 1
    if k < len(toks) and toks[k].text == "<":
        k = _matching(toks, k, 200) + 1
    if k < len(toks) and toks[k].text == "(":
        k = _matching(toks, k, 2000) + 1
    while k < len(toks) and (toks[k].kind == "id" or toks[k].text in ("->", "::", "*", "&", "<", ">")):
        k += 1
    if k < len(toks) and toks[k].text == "{":
        return _matching(toks, k) + 1
    return None


def _lambda_brace(toks: list[Tok], i: int) -> bool:
    """The `{` at i opens a lambda's body (`[&](int v) mutable {`), not a function's."""
    j = i - 1
    while j >= 0 and i - j < 200 and (toks[j].kind == "id" or toks[j].text in ("->", "::", "*", "&", ">")):
        j -= 1
    if j >= 0 and toks[j].text == ")":
        depth = 0
        while j >= 0 and i - j < 400:
            depth += {")": 1, "(": -1}.get(toks[j].text, 0)
            if depth == 0:
                break
            j -= 1
        j -= 1
        while j >= 0 and toks[j].kind == "id" and i - j < 400:  # `__device__` or `mutable` before `(`
            j -= 1
    if j < 0 or toks[j].text != "]":
        return False
    opening = next((k for k in range(j - 1, max(-1, j - 100), -1) if toks[k].text == "["), None)
    before = toks[opening - 1] if opening else _END
    return (
        opening is not None
        and before.text not in ("]", ")", "operator")
        and (before.kind != "id" or before.text == "return")
    )


def _body_runs_code(name: str, bases: set[str], body: list[Tok], known: set[str]) -> bool:
    """A class body (with its braces) whose construction runs code: a user constructor or destructor, a
    member or base of a class that does, or a member initializer that calls something."""
    if bases & known:
        return True
    j, paren = 1, 0
    while j < len(body) - 1:
        t = body[j]
        nxt = body[j + 1].text if j + 1 < len(body) else ""
        if t.text == "{" and paren == 0:
            initializer = body[j - 1].kind == "id" and body[j - 1].text not in _BODY_SPECIFIERS
            close = _matching(body, j)
            if initializer and _first_code(body[j + 1 : min(close, j + 2000)], known):
                return True
            j = close + 1
            continue
        paren += {"(": 1, ")": -1}.get(t.text, 0)
        special = t.text == name and nxt == "(" and not _defaulted(body, j + 1)
        if special or (t.kind == "id" and t.text in known and t.text != name):
            return True
        if t.text == "=" and paren == 0 and _first_code(body[j + 1 : _statement_end(body, j)], known):
            return True
        j += 1
    return False


_BODY_SPECIFIERS = {"const", "override", "final", "noexcept", "mutable", "volatile", "try"}


def _defaulted(toks: list[Tok], open_paren: int) -> bool:
    """`S() = default;` / `~S() = delete;`: no code of the solution's."""
    close = _matching(toks, open_paren)
    after = [t.text for t in toks[close + 1 : close + 3]]
    return after in (["=", "default"], ["=", "delete"])


def _statement_end(toks: list[Tok], j: int, limit: int = 500) -> int:
    """The index of the `;`, `{` or `}` after j (looked for within `limit` tokens)."""
    limit = min(len(toks), j + limit)
    while j < limit and toks[j].text not in (";", "{", "}"):
        j += 1
    return j


def _class_specs(toks: list[Tok]) -> Iterator[tuple[str, set[str], list[Tok]]]:
    """(name, bases, body with braces) of each class definition in a file, down to 8 levels of braces."""
    depth = 0
    for j, t in enumerate(toks):
        depth += {"{": 1, "}": -1}.get(t.text, 0)
        if t.text not in ("struct", "class", "union") or (j > 0 and toks[j - 1].text == "enum") or depth > 8:
            continue
        k = j + 1
        while k < len(toks) and k - j < 200 and toks[k].text not in ("{", ";", "=", "(", ")", ","):
            k += 1
        if k >= len(toks) or toks[k].text != "{":
            continue
        head = [h for h in _strip_decorations(toks[j + 1 : k]) if h.kind == "id"]
        name = head[0].text if head else ""
        bases = {h.text for h in head[1:]} - {"public", "private", "protected", "virtual", "final"}
        yield name, bases, toks[k : _matching(toks, k) + 1]


def _out_of_line_specials(toks: list[Tok]) -> Iterator[str]:
    """`S::S(...)` and `S::~S()` defined outside the class: S runs code."""
    for j in range(1, len(toks) - 2):
        if toks[j].text != "::":
            continue
        k = j + 2 if toks[j + 1].text == "~" else j + 1
        owner, name = toks[j - 1].text, toks[k].text if k < len(toks) else ""
        if toks[j - 1].text == ">":  # `W<T>::W(`
            opening = next((m for m in range(j - 2, max(-1, j - 50), -1) if toks[m].text == "<"), 0)
            owner = toks[opening - 1].text if opening > 0 else ""
        if name and name == owner and k + 1 < len(toks) and toks[k + 1].text == "(":
            yield name


def _type_aliases(toks: list[Tok]) -> Iterator[tuple[str, set[str]]]:
    """(alias, identifiers of what it names) of each `using A = ...;` and `typedef ... A;`."""
    for j, t in enumerate(toks):
        if t.text == "using" and j + 2 < len(toks) and toks[j + 2].text == "=":
            end = _statement_end(toks, j, 64)
            yield toks[j + 1].text, {w.text for w in toks[j + 3 : end] if w.kind == "id"}
        elif t.text == "typedef":
            end = _statement_end(toks, j, 64)
            words = [w.text for w in toks[j + 1 : end] if w.kind == "id"]
            if words:
                yield words[-1], set(words[:-1])


_TYPE_INTRODUCERS = {"struct", "class", "union", "enum", "namespace", "typename", "concept"}


def declared_types(toks: list[Tok]) -> set[str]:
    """Classes, enums, namespaces, aliases and template parameters the sources declare."""
    out = set()
    for a, b in itertools.pairwise(toks):
        if b.kind == "id" and a.text in _TYPE_INTRODUCERS:
            out.add(b.text)
    return out | {alias for alias, _ in _type_aliases(toks)}


def code_classes(files: list[list[Tok]]) -> set[str]:
    """Classes of the sources whose construction or destruction runs code (user constructors and
    destructors, members and bases of such classes, member initializers that call), and their aliases."""
    specs = [spec for toks in files for spec in _class_specs(toks)]
    aliases = [alias for toks in files for alias in _type_aliases(toks)]
    out = {name for toks in files for name in _out_of_line_specials(toks)}
    for _ in range(4):  # members, bases and aliases of the classes found in the round before
        before = len(out)
        out |= {name for name, bases, body in specs if name and _body_runs_code(name, bases, body, out)}
        out |= {alias for alias, words in aliases if words & out}
        if len(out) == before:
            break
    return out


def declared_names(toks: list[Tok]) -> set[str]:
    """Functions, macros and lambdas the sources define (`float relu(float v)`, `auto sum = [&](...)`)."""
    out = set()
    for a, b, c, d in zip(toks, toks[1:], toks[2:], toks[3:], strict=False):
        typed = (a.kind == "id" and a.text not in _KEYWORDS) or a.text in (">", "*", "&")
        if b.kind == "id" and typed and (c.text == "(" or (c.text == "=" and d.text == "[")):
            out.add(b.text)
    return out


def scan_native(sources: dict[str, str], allow_vendor: bool) -> list[Hit]:
    """Hits over all native files; a function or class one file declares is known to the others."""
    toks = {name: list(tokenize(text)) for name, text in sources.items()}
    files = list(toks.values())
    program = Program(
        declared=set().union(*map(declared_names, files)),
        types=set().union(*map(declared_types, files)),
        code_classes=code_classes(files),
    )
    hits: list[Hit] = []
    for name, ts in toks.items():
        hits.extend(NativeScan(name, ts, allow_vendor, program).run())
    return hits
