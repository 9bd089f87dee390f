"""The judge's reading of code written at run time (engine/written_code.py), on this very process: real
mappings, real pages written through a real mprotect, read back from /proc/<pid>/smaps."""

from __future__ import annotations

import ctypes
import mmap
import os

from evalsvc.engine.written_code import exec_pages, written_since

PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4


def test_nothing_written_reads_as_nothing() -> None:
    before = exec_pages(os.getpid())
    after = exec_pages(os.getpid())
    assert before and after is not None
    assert any(name.endswith(".so") or "python" in name for _, _, name in before)  # file-backed text seen
    assert written_since(before, after) == []


def test_code_made_in_anonymous_memory_is_found() -> None:
    before = exec_pages(os.getpid())
    assert before is not None
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    m = mmap.mmap(-1, mmap.PAGESIZE, flags=flags, prot=PROT_READ | PROT_WRITE | PROT_EXEC)
    m.write(b"\xc3")  # ret: one written page of executable anonymous memory
    try:
        found = written_since(before, exec_pages(os.getpid()) or {})
        assert any("anonymous memory" in f for f in found), found
    finally:
        m.close()


def test_shared_executable_memory_is_found() -> None:
    """Shared anonymous memory (a /dev/zero mapping to the kernel) counts no private pages: all of its
    resident pages count once it is executable and writable."""
    before = exec_pages(os.getpid())
    assert before is not None
    m = mmap.mmap(-1, mmap.PAGESIZE, prot=PROT_READ | PROT_WRITE | PROT_EXEC)
    m.write(b"\xc3")
    try:
        found = written_since(before, exec_pages(os.getpid()) or {})
        assert any("zero" in f for f in found), found
    finally:
        m.close()


def test_a_libraries_text_written_over_is_found() -> None:
    """Text of a loaded library made writable and written (what copying a kernel over one's own text
    does) leaves a private copy of the page: the mapping's written kB grow."""
    libc = ctypes.CDLL(None, use_errno=True)
    libm = ctypes.CDLL("libm.so.6")
    before = exec_pages(os.getpid())
    assert before is not None
    address = ctypes.cast(libm.cos, ctypes.c_void_p).value
    assert address is not None
    page = address & ~(mmap.PAGESIZE - 1)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(page, mmap.PAGESIZE, PROT_READ | PROT_WRITE | PROT_EXEC) == 0, ctypes.get_errno()
    byte = ctypes.c_ubyte.from_address(address)
    byte.value = byte.value  # the same byte written back: the page is a private copy all the same
    assert libc.mprotect(page, mmap.PAGESIZE, PROT_READ | PROT_EXEC) == 0
    found = written_since(before, exec_pages(os.getpid()) or {})
    assert any("libm" in f for f in found), found


def test_a_process_that_cannot_be_read_gives_none() -> None:
    assert exec_pages(2**22 + 12345) is None
