"""Turn compiler output into what an agent can act on: first errors with file:line, ptxas resources."""

from __future__ import annotations

import re
import shutil
import subprocess

from evalsvc.core.results import Diagnostic, KernelResources

_GCC = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)?\s*(?P<sev>fatal error|error|warning):\s*(?P<msg>.*)$"
)
_NVCC = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\):\s*(?P<sev>error|warning)[^:]*:\s*(?P<msg>.*)$")
_ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'")
_FRAME = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, (?P<ld>\d+) bytes spill loads"
)
_USED = re.compile(r"ptxas info\s*: Used (?P<regs>\d+) registers(?P<rest>.*)$")
_SMEM = re.compile(r"(\d+) bytes smem")


def _short_path(path: str) -> str:
    """Build paths are sandbox internals; keep the file name an agent knows."""
    return path.rsplit("/", 1)[-1]


def parse_diagnostics(log: str, limit: int = 10) -> list[Diagnostic]:
    """The first `limit` errors (then warnings) from gcc/nvcc output, with file:line."""
    errors: list[Diagnostic] = []
    warnings: list[Diagnostic] = []
    for raw in log.splitlines():
        line = raw.strip()
        m = _GCC.match(line) or _NVCC.match(line)
        if not m:
            continue
        sev = "error" if "error" in m["sev"] else "warning"
        d = Diagnostic(severity=sev, message=m["msg"][:400], file=_short_path(m["file"]), line=int(m["line"]))
        (errors if sev == "error" else warnings).append(d)
    return (errors + warnings)[:limit]


def _demangle(names: list[str]) -> dict[str, str]:
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {}
    try:
        out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(zip(names, out.stdout.splitlines(), strict=False))


def parse_ptxas(log: str) -> list[KernelResources]:
    """ptxas -v resource lines per kernel entry (registers, shared memory, stack, spills)."""
    kernels: list[KernelResources] = []
    current: KernelResources | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = KernelResources(kernel=m["name"], arch=m["arch"])
            kernels.append(current)
        elif current is not None and (m := _FRAME.search(line)):
            current.stack_bytes = int(m["stack"])
            current.spill_stores_bytes = int(m["st"])
            current.spill_loads_bytes = int(m["ld"])
        elif current is not None and (m := _USED.search(line)):
            current.registers = int(m["regs"])
            smem = _SMEM.search(m["rest"])
            current.shared_bytes = int(smem.group(1)) if smem else 0
    names = _demangle([k.kernel for k in kernels])
    for k in kernels:
        k.kernel = names.get(k.kernel, k.kernel)[:200]
    return kernels


def excerpt(log: str, max_lines: int = 40, max_chars: int = 4000) -> str:
    """Errors first: the lines around the first error, else the log's tail."""
    lines = log.splitlines()
    first = next((i for i, ln in enumerate(lines) if "error" in ln.lower()), None)
    chosen = lines[max(0, first - 3) : first + max_lines] if first is not None else lines[-max_lines:]
    return "\n".join(chosen)[:max_chars]
