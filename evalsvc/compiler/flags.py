"""The compiler and linker flags a solution hands to load_inline, screened by an allowlist.

Flags reach g++, nvcc and the linker through torch's build.ninja, where ninja runs each command through
`/bin/sh -c`: a flag can name files to read or write, load plugins, pass options straight to the linker
(`-Wl,-Map=/out/sources.json` overwrote the build's evidence) or, with shell syntax, run commands. So only
flags that tune code generation are let through: optimisation levels, code-generation `-f` flags that write
no files and load nothing, `-std=c++17` and newer, warnings, `-D NAME[=number]`, `-U NAME`, debug info, host
ISA flags, the nvcc code-generation options, and the vendor libraries when the task allows them. Target
selection (`-arch`, `-gencode`, `-rdc`, the host compiler) is the service's. Each flag string is split on
spaces first, as the shell does (`"-O3 -DX"` is two flags); anything with quotes, `$`, `;` or control
characters is refused, because no allowed flag needs them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from evalsvc.core.results import Finding

FLAG_RULE = "build-flag"
FLAG_FILE = "load_inline flags"

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_EXPONENT = r"(?:[eE][+-]?[0-9]+)?"
_NUMBER = rf"[+-]?(?:0[xX][0-9a-fA-F]+|[0-9]+\.?[0-9]*{_EXPONENT}|\.[0-9]+{_EXPONENT})[uUlLfF]*"
_MACRO = re.compile(rf"({_NAME})(?:=(|{_NUMBER}|true|false))?")
# Later standards only: ISO C++ before 17 turns on trigraphs (`??=define`), which the screens do not read.
_STD = r"(?:c|gnu)\+\+(?:17|1z|20|2a|23|2b|26|2c)"
# Code-generation switches that write no files and load nothing; each also as `-fno-<name>`.
_F_FLAGS = {
    "fast-math", "unsafe-math-optimizations", "math-errno", "trapping-math", "finite-math-only",
    "signed-zeros", "associative-math", "reciprocal-math", "rounding-math", "cx-limited-range",
    "single-precision-constant", "unroll-loops", "unroll-all-loops", "peel-loops", "tree-vectorize",
    "tree-loop-vectorize", "tree-slp-vectorize", "prefetch-loop-arrays", "omit-frame-pointer",
    "strict-aliasing", "strict-overflow", "wrapv", "inline", "inline-functions", "inline-small-functions",
    "PIC", "pic", "plt", "semantic-interposition", "visibility-inlines-hidden", "permissive", "signed-char",
    "unsigned-char", "builtin", "stack-protector", "stack-protector-strong", "ipa-pta", "gcse", "ivopts",
    "loop-interchange", "loop-unroll-and-jam", "split-loops", "unswitch-loops", "schedule-insns",
    "schedule-insns2", "tracer", "variable-expansion-in-unroller", "function-sections", "data-sections",
    "threadsafe-statics", "sized-deallocation", "aligned-new", "openmp", "openmp-simd",
    "diagnostics-show-option", "show-column",
}  # fmt: skip
_F_VALUES = re.compile(
    r"-f(?:excess-precision=(?:fast|standard|16)|fp-contract=(?:fast|on|off)|visibility=(?:default|hidden)"
    r"|(?:vect|simd)-cost-model=(?:unlimited|dynamic|cheap|very-cheap)|diagnostics-color=(?:always|never|auto)"
    r"|(?:inline-limit|max-errors|template-depth|constexpr-depth|constexpr-loop-limit|constexpr-ops-limit)"
    r"=[0-9]+)"
)
_ISA = {
    "mmx", "sse", "sse2", "sse3", "ssse3", "sse4", "sse4.1", "sse4.2", "sse4a", "avx", "avx2", "avx512f",
    "avx512cd", "avx512vl", "avx512bw", "avx512dq", "avx512ifma", "avx512vbmi", "avx512vbmi2", "avx512vnni",
    "avx512bitalg", "avx512vpopcntdq", "avx512bf16", "avx512fp16", "avxvnni", "avxifma", "avxvnniint8", "fma",
    "fma4", "f16c", "bmi", "bmi2", "lzcnt", "popcnt", "movbe", "aes", "pclmul", "sha", "adx", "prfchw",
    "amx-tile", "amx-int8", "amx-bf16", "amx-fp16", "vzeroupper", "avx256-split-unaligned-load",
    "avx256-split-unaligned-store",
}  # fmt: skip
_HOST_OK = re.compile(
    rf"-O[0-3sgz]?|-Ofast|-std={_STD}|-g[0-3]?|-ggdb[0-3]?|-w|-pedantic(?:-errors)?|-pthread"
    r"|-W(?!(?:l|a|p)(?:,|$))[a-z][a-z0-9+-]*(?:=[a-z0-9+_-]+)?"  # warnings; `-Wl,` `-Wa,` `-Wp,` are not
    r"|-m(?:arch|tune)=[a-z0-9_.+-]+|-mprefer-vector-width=(?:128|256|512|none)|-mfpmath=(?:sse|387|both)"
)
# nvcc: its code-generation options, in the spellings it accepts.
_NVCC_OK = re.compile(
    rf"-O[0-3]|--?std={_STD}|-g|-G|--device-debug|-lineinfo|--generate-line-info|-w|--disable-warnings"
    r"|--?use_fast_math|--use-fast-math|--?expt-relaxed-constexpr|--?expt-extended-lambda|--?extended-lambda"
    r"|--?(?:ftz|prec-div|prec-sqrt|fmad)=(?:true|false)|--?restrict|--?maxrregcount=[0-9]+"
    r"|--?extra-device-vectorization|-res-usage|--resource-usage|--(?:no-)?display-error-number"
    r"|--?diag[-_](?:suppress|warn|error)=[A-Za-z0-9_]+(?:,[A-Za-z0-9_]+)*"
    r"|-W(?!(?:l|a|p)(?:,|$))[a-z][a-z0-9+-]*(?:=[a-z0-9+_-]+)?|-Werror=[a-z0-9-]+(?:,[a-z0-9-]+)*"
)
_PTXAS_OK = re.compile(
    r"-v|--verbose|-O[0-3]|--opt-level=[0-3]|--warn-on-spills|-warn-spills|--warn-on-local-memory-usage"
    r"|-warn-lmem-usage|--warn-on-double-precision-use|-warn-double-usage|-dlcm=(?:ca|cg)"
    r"|--def-load-cache=(?:ca|cg|cs|lu|cv)|-?-allow-expensive-optimizations(?:=(?:true|false))?"
    r"|--?maxrregcount=[0-9]+"
)
_CUDAFE_OK = re.compile(r"--diag[-_](?:suppress|warn|error)=[A-Za-z0-9_]+|--display_error_number")
_LIBS = {"m", "gomp", "pthread", "cuda", "cudart"}
_VENDOR_LIBS = {"cublas", "cublasLt", "cudnn", "cufft", "cufftw", "cusparse", "cusparseLt", "cusolver",
                "cusolverMg", "cutensor", "cutensorMg", "curand"}  # fmt: skip
_VENDOR_LIB = re.compile(r"cudnn_[a-z_]+")  # cuDNN 9 splits into cudnn_ops, cudnn_cnn, ...
# -D/-U may not redefine keywords or what decides device code, asm and lookup.
_KEYWORDS = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case",
    "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval",
    "constexpr", "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype",
    "default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern",
    "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace",
    "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected",
    "public", "register", "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
    "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw",
    "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void",
    "volatile", "wchar_t", "while", "xor", "xor_eq",
}  # fmt: skip
_RESERVED = _KEYWORDS | {
    "__asm", "__asm__", "__attribute", "__attribute__", "__declspec", "_Pragma", "defined", "__has_include",
    "__has_include_next", "__device__", "__global__", "__host__", "__shared__", "__constant__", "__managed__",
    "__forceinline__", "__noinline__", "__launch_bounds__", "__restrict__", "__CUDA_ARCH__", "__CUDACC__",
    "__NVCC__", "__CUDACC_RTC__", "__cplusplus", "__FILE__", "__LINE__", "__COUNTER__",
    "TORCH_EXTENSION_NAME", "TORCH_API_INCLUDE_EXTENSION_H", "_GLIBCXX_USE_CXX11_ABI",
}  # fmt: skip
# Flags that take the next item as their value: when refused, the value goes with them.
_TAKES_VALUE = {
    "-I", "-L", "-l", "-o", "-x", "-B", "-include", "-imacros", "-isystem", "-iquote", "-idirafter",
    "-iprefix", "-iwithprefix", "-iwithprefixbefore", "-isysroot", "-MF", "-MT", "-MQ", "-Xlinker",
    "-Xassembler", "-Xpreprocessor", "-u", "-T", "-e", "-z", "-wrapper", "-specs", "-aux-info",
    "-dumpbase", "-dumpdir", "-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code",
    "--gpu-code", "-ccbin", "--compiler-bindir", "-Xnvlink", "--nvlink-options", "-Xarchive",
    "--archive-options", "-Xfatbin", "--fatbin-options", "-optf", "--options-file", "-odir",
    "--output-directory", "--keep-dir", "-rdc", "--relocatable-device-code", "-cudart", "--cudart",
    "--default-stream", "-std", "--std", "-t", "--threads",
}  # fmt: skip
_INSTEAD = {
    "extra_cflags": "allowed: -O<n>, code-generation -f flags (-ffast-math, -fopenmp, ...), -std=c++17 or "
    "newer, -W<warning>, -w, -D NAME[=number], -U NAME, -g, -pthread, -march=/-mtune=/-m<isa>",
    "extra_cuda_cflags": "allowed: -O<n>, --use_fast_math, -lineinfo, --expt-relaxed-constexpr, "
    "--extended-lambda, -ftz=/-prec-div=/-prec-sqrt=/-fmad=, --restrict, -maxrregcount, -Xptxas -v, "
    "-Xcompiler <allowed host flags>, --diag-suppress, -D/-U, -std=c++17 or newer, -g, -G",
    "extra_ldflags": "allowed: -fopenmp, -pthread, -lm, -lgomp, -lpthread, -lcuda, -lcudart, and vendor "
    "libraries (-lcublas, -lcudnn, ...) where the task allows them",
}
# Families of refused flags and why, the first that matches names the flag's reason.
_REFUSED = [
    (re.compile(r"-(?:Wl|Xlinker|Wa|Xassembler|Wp|Xpreprocessor)\b|-Xnvlink|--nvlink-options|-Xarchive"
                r"|--archive-options|-Xfatbin|--fatbin-options|-[Tuz]$"),
     "passes options straight to the linker, assembler or preprocessor, which can write files or change "
     "what is linked"),
    (re.compile(r"--?std"),
     "selects a language standard before C++17 (whose trigraphs the screens do not read) or an unknown one"),
    (re.compile(r"-arch\b|--gpu-architecture|-gencode|--generate-code|-code\b|--gpu-code|-rdc\b"
                r"|--relocatable-device-code|-dc\b|--device-c|-dlink|--keep|-ccbin|--compiler-bindir|-cudart"
                r"|--cudart|--default-stream|-shared|-static|-c$|-E$|-S$|--ptx|--cubin|-fuse-ld|--ld-path"),
     "selects the target, the toolchain or the build steps, which the service sets"),
    (re.compile(r"-l"), "links a library outside the allowlist"),
    (re.compile(r"-(?:I|L|include|imacros|isystem|iquote|idirafter|iprefix|iwith|isysroot|B|specs|-sysroot"
                r"|fplugin|wrapper|o|save-temps|M|fdump|fprofile|fauto-profile|fstack-usage|fcallgraph"
                r"|fsave-optimization|fopt-info|fdiagnostics-format|x|-options-file|-output"
                r"|time|-run|ansi|trigraphs|traditional|fdirectives|fpreprocessed|finput-charset|undef|flto"
                r"|fsanitize|finstrument|fpch|dump)|@"),
     "names a path, writes a file, loads code or changes how the source is read"),
]  # fmt: skip


def check_flags(
    cflags: list[str], cuda_cflags: list[str], ldflags: list[str], allow_vendor_libs: bool
) -> list[Finding]:
    """Findings (rule `build-flag`) for each flag outside the allowlist; [] when every flag is allowed."""
    found: list[Finding] = []
    for where, items, allowed in (
        ("extra_cflags", cflags, _host_flag),
        ("extra_cuda_cflags", cuda_cflags, _nvcc_flag),
        ("extra_ldflags", ldflags, lambda flag, value: _link_flag(flag, value, allow_vendor_libs)),
    ):
        for flag, why in _refusals(items, allowed):
            message = f"{where}: `{flag}` {why}; {_INSTEAD[where]}"
            found.append(Finding(rule=FLAG_RULE, message=message, file=FLAG_FILE, line=0))
    return found


Checker = Callable[[str, str | None], tuple[int, str | None]]  # (flag, next item) -> (items used, refusal)


def split_flags(items: list[str]) -> Iterator[str]:
    """Each item split on spaces, as the shell behind build.ninja does."""
    for item in items:
        yield from str(item).split(" ")


def _refusals(items: list[str], allowed: Checker) -> Iterator[tuple[str, str]]:
    bad = [item for item in items if not isinstance(item, str) or not re.fullmatch(r"[\x21-\x7e ]*", item)]
    for item in bad:
        yield ascii(item)[:80], "has characters no flag needs (control characters, tabs, non-ASCII)"
    words = [w for w in split_flags([i for i in items if i not in bad]) if w]
    j = 0
    while j < len(words):
        flag = words[j]
        used, why = allowed(flag, words[j + 1] if j + 1 < len(words) else None)
        if why is None and re.search(r"""['"`$;&|<>(){}\[\]*?~!#\\]""", " ".join(words[j : j + used])):
            why = "has shell syntax, which no flag needs"
        if why is not None:
            yield " ".join(words[j : j + max(used, 1)])[:120], why
        j += max(used, 1)


def _host_flag(flag: str, value: str | None) -> tuple[int, str | None]:
    """A g++ flag (also one inside nvcc's -Xcompiler)."""
    if flag in ("-D", "-U"):
        return 2, _macro_refusal(flag, value)
    if flag.startswith(("-D", "-U")):
        return 1, _macro_refusal(flag[:2], flag[2:])
    if _HOST_OK.fullmatch(flag) or _F_VALUES.fullmatch(flag) or _f_switch(flag) or _isa(flag):
        return 1, None
    return _refused(flag)


def _nvcc_flag(flag: str, value: str | None) -> tuple[int, str | None]:
    if flag in ("-D", "-U"):
        return 2, _macro_refusal(flag, value)
    if flag.startswith(("-D", "-U")):
        return 1, _macro_refusal(flag[:2], flag[2:])
    if flag in ("-std", "--std") and value and re.fullmatch(_STD, value):
        return 2, None
    if flag in ("-maxrregcount", "--maxrregcount") and value and value.isdigit():
        return 2, None
    sub = _sub_options(flag, value)
    if sub is not None:
        return sub
    if _NVCC_OK.fullmatch(flag):
        return 1, None
    return _refused(flag)


def _sub_options(flag: str, value: str | None) -> tuple[int, str | None] | None:
    """-Xcompiler / -Xptxas / -Xcudafe with their comma-separated options (`-Xptxas -v,-O3`, `-Xptxas=-v`)."""
    for names, check, what in (
        (("-Xcompiler", "--compiler-options"), lambda o: _host_flag(o, None) == (1, None), "host compiler"),
        (("-Xptxas", "--ptxas-options"), _PTXAS_OK.fullmatch, "ptxas"),
        (("-Xcudafe", "--cudafe-options"), _CUDAFE_OK.fullmatch, "cudafe"),
    ):
        name, eq, inline = flag.partition("=")
        if name not in names:
            continue
        options, used = (inline, 1) if eq else (value or "", 2)
        bad = [o for o in options.split(",") if not check(o)]
        return used, (f"passes `{bad[0]}` to the {what}, which is outside its allowlist" if bad else None)
    return None


def _link_flag(flag: str, value: str | None, allow_vendor_libs: bool) -> tuple[int, str | None]:
    if flag in ("-fopenmp", "-fopenmp-simd", "-pthread"):
        return 1, None
    if flag.startswith("-l"):
        used, lib = (2, value or "") if flag == "-l" else (1, flag[2:])
        if lib in _LIBS:
            return used, None
        if lib in _VENDOR_LIBS or _VENDOR_LIB.fullmatch(lib):
            return used, None if allow_vendor_libs else "is a vendor library, which this task does not allow"
        return used, "links a library outside the allowlist"
    return _refused(flag)


def _refused(flag: str) -> tuple[int, str]:
    used = 2 if flag in _TAKES_VALUE else 1
    why = next((why for pattern, why in _REFUSED if pattern.match(flag)), None)
    if why is None and not flag.startswith("-"):
        why = "is not a flag: sources and libraries come from the solution's code, not its flags"
    return used, why or "is not on the allowlist of build flags"


def _macro_refusal(flag: str, definition: str | None) -> str | None:
    m = _MACRO.fullmatch(definition or "")
    if m is None or (flag == "-U" and m.group(2) is not None):
        return "is not a plain macro definition: -D NAME or -D NAME=<number>, -U NAME"
    if m.group(1) in _RESERVED:
        return f"redefines `{m.group(1)}`, a keyword or a macro that decides device code, asm or lookup"
    return None


def sets_predefined_macros(flag: str) -> bool:
    """An allowed flag whose only effect on preprocessing is the macros it predefines: `-O3` (`__OPTIMIZE__`),
    `-ffast-math` (`__FAST_MATH__`), `-fopenmp` (`_OPENMP`), `-march=native` / `-mavx2` (`__AVX2__`)."""
    if re.fullmatch(r"-O[0-3sgz]?|-Ofast|-m(?:arch|tune)=[a-z0-9_.+-]+", flag) or _isa(flag):
        return True
    name = flag.removeprefix("-f").removeprefix("no-")
    return flag.startswith("-f") and name in _MACRO_F_FLAGS


_MACRO_F_FLAGS = {"fast-math", "finite-math-only", "openmp", "openmp-simd", "signed-char", "unsigned-char"}


def _f_switch(flag: str) -> bool:
    """`-ffast-math`, `-fno-trapping-math`: a curated code-generation switch."""
    name = flag.removeprefix("-f")
    return flag.startswith("-f") and (name in _F_FLAGS or (name.startswith("no-") and name[3:] in _F_FLAGS))


def _isa(flag: str) -> bool:
    """`-mavx2`, `-mno-fma`: a host ISA extension."""
    name = flag.removeprefix("-m")
    return flag.startswith("-m") and (name in _ISA or (name.startswith("no-") and name[3:] in _ISA))
