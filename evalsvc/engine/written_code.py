"""Machine code written at run time in the runner, read by the judge from outside it (trusted side).

The CPU device's library check counts samples by the file a mapping holds; a candidate that copies a
library's kernel over its own library's text (red team 6: MKL's sgemm micro-kernel) has library code
counted as its own. Pages of an executable mapping that a process wrote are private copies the kernel
reports as `Anonymous` in /proc/<pid>/smaps, code made in anonymous memory has no file at all, and an
executable mapping that is writable or shared can be written at any time: any of these growing after the
candidate was imported is code nobody compiled in the compile stage.
"""

from __future__ import annotations

import re

ExecPages = dict[tuple[int, int, str], int]  # (start, end, name) of an executable mapping -> kB written

_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \d+\s*(.*)$")
_KERNEL_MADE = {"[vdso]", "[vsyscall]", "[uprobes]"}  # the kernel's own pages, not writable by the process


def exec_pages(pid: int) -> ExecPages | None:
    """Every executable mapping of process `pid` with the kB of it the process wrote; None where smaps
    cannot be read (the process is gone, or the judge may not read it)."""
    try:
        with open(f"/proc/{pid}/smaps", encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
    except OSError:
        return None
    pages: ExecPages = {}
    key: tuple[int, int, str] | None = None
    field = "Anonymous:"
    for line in text.splitlines():
        if m := _HEADER.match(line):
            start, end, perms, name = m.groups()
            key = (int(start, 16), int(end, 16), name) if "x" in perms and name not in _KERNEL_MADE else None
            # writable or shared: every resident page may be written code, not only the private copies
            field = "Rss:" if "w" in perms or perms[3] == "s" else "Anonymous:"
            if key is not None:
                pages[key] = 0
        elif key is not None and line.startswith(field):
            pages[key] = int(line.split()[1])
    return pages


def written_since(before: ExecPages, after: ExecPages) -> list[str]:
    """The executable mappings with more written pages than before (new ones included), described."""
    found = []
    for (start, end, name), kb in sorted(after.items()):
        grown = kb - before.get((start, end, name), 0)
        if grown > 0:
            where = name.rsplit("/", 1)[-1] if name else "anonymous memory"
            found.append(f"{where} at {start:#x} ({grown} kB)")
    return found
