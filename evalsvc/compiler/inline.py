"""What a `load_inline` call asks to build, normalised so capture time and run time agree on its key.

The compile stage records every `load_inline` call a KernelBench solution makes at import; the runner
recognises the same call later by this key and loads the prebuilt library instead of compiling.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from pydantic import BaseModel, Field

from evalsvc.core.hashing import content_hash

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class NotStatic(Exception):
    """The solution's extension sources differ between imports (random or time-dependent)."""


class InlineCall(BaseModel):
    """The build-relevant arguments of one `load_inline` call."""

    name: str
    cpp_sources: list[str]
    cuda_sources: list[str] = Field(default_factory=list)
    functions: dict[str, str] | None = None
    extra_cflags: list[str] = Field(default_factory=list)
    extra_cuda_cflags: list[str] = Field(default_factory=list)
    extra_ldflags: list[str] = Field(default_factory=list)
    with_cuda: bool | None = None
    with_pytorch_error_handling: bool = True
    no_implicit_headers: bool = False

    @property
    def key(self) -> str:
        return content_hash(self.model_dump(mode="json"), length=20)

    @property
    def uses_cuda(self) -> bool:
        return bool(self.cuda_sources) if self.with_cuda is None else self.with_cuda


def _signature(
    name: Any,
    cpp_sources: Any,
    cuda_sources: Any = None,
    sycl_sources: Any = None,
    functions: Any = None,
    extra_cflags: Any = None,
    extra_cuda_cflags: Any = None,
    extra_sycl_cflags: Any = None,
    extra_ldflags: Any = None,
    extra_include_paths: Any = None,
    build_directory: Any = None,
    verbose: Any = False,
    with_cuda: Any = None,
    with_sycl: Any = None,
    is_python_module: Any = True,
    with_pytorch_error_handling: Any = True,
    keep_intermediates: Any = True,
    use_pch: Any = False,
    no_implicit_headers: Any = False,
) -> None:
    """Mirror of torch.utils.cpp_extension.load_inline's parameters, for binding call arguments."""


_SIG = inspect.signature(_signature)


def _str_list(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise TypeError(f"load_inline: {what} must be a string or a list of strings")


def normalize_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> InlineCall:
    """Bind a load_inline call's arguments and keep what decides the build."""
    try:
        bound = _SIG.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"load_inline: {e}") from None
    a = bound.arguments
    name = a["name"]
    if not isinstance(name, str) or not _NAME.match(name):
        raise TypeError(f"load_inline: name must be a plain identifier, got {name!r}")
    if a.get("sycl_sources"):
        raise TypeError("load_inline: SYCL sources are not supported")
    if a.get("extra_include_paths"):
        raise TypeError("load_inline: extra_include_paths is not supported (sources must be self-contained)")
    if a.get("is_python_module", True) is not True:
        raise TypeError("load_inline: is_python_module=False is not supported")
    functions = a.get("functions")
    if isinstance(functions, str):
        functions = {functions: functions}
    elif isinstance(functions, list | tuple):
        functions = {str(f): str(f) for f in functions}
    elif functions is not None and not isinstance(functions, dict):
        raise TypeError("load_inline: functions must be a string, a list or a dict")
    return InlineCall(
        name=name,
        cpp_sources=_str_list(a.get("cpp_sources"), "cpp_sources"),
        cuda_sources=_str_list(a.get("cuda_sources"), "cuda_sources"),
        functions=functions,
        extra_cflags=_str_list(a.get("extra_cflags"), "extra_cflags"),
        extra_cuda_cflags=_str_list(a.get("extra_cuda_cflags"), "extra_cuda_cflags"),
        extra_ldflags=_str_list(a.get("extra_ldflags"), "extra_ldflags"),
        with_cuda=a.get("with_cuda"),
        with_pytorch_error_handling=bool(a.get("with_pytorch_error_handling", True)),
        no_implicit_headers=bool(a.get("no_implicit_headers", False)),
    )


def generated_sources(call: InlineCall) -> dict[str, str]:
    """The files load_inline would write: main.cpp (with bindings) and cuda.cu, byte for byte."""
    cpp = list(call.cpp_sources)
    if not call.no_implicit_headers:
        cpp.insert(0, "#include <torch/extension.h>")
    if call.functions is not None:
        cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        for fn, doc in call.functions.items():
            target = f"torch::wrap_pybind_function({fn})" if call.with_pytorch_error_handling else fn
            cpp.append(f'm.def("{fn}", {target}, "{doc}");')
        cpp.append("}")
    files = {"main.cpp": "\n".join(cpp)}
    if call.cuda_sources:
        cu = list(call.cuda_sources)
        if not call.no_implicit_headers:
            cu[:0] = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
        files["cuda.cu"] = "\n".join(cu)
    return files
