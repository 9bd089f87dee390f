"""Screen a candidate's own object files by what they link to and what their machine code does.

The candidate's translation units are compiled apart from the Python bindings (which the service
generates), so before anything is linked the trusted side reads each ELF relocatable object (x86-64)
and refuses it for what it really does, whatever its source text looked like:

- `symbol-*`: every undefined symbol must be defined by another of the candidate's objects or be on the
  allowlist (libc/libm basics, the CUDA runtime, OpenMP, libstdc++, and the ATen/c10 API for allocation,
  views, metadata and the current stream). Refused families: `symbol-aten-compute`, `symbol-python`,
  `symbol-loader`, `symbol-escape`, `symbol-vendor`; anything else is `symbol-unknown`. A C function
  the candidate defines under a refused name (`getenv`) is refused too: exported with default visibility,
  the dynamic linker binds calls to it to the definition the process has already loaded.
- `global-constructor`: code that runs when the library loads (`.init_array` and friends, IFUNC
  resolvers), except nvcc's fatbinary registration and GCC's per-file initialiser when all they reach is
  registration, kernel launch internals, `std::ios_base::Init` and `atexit`.
- `machine-code`: `syscall`, `int N`, timestamp counters and hardware randomness in the host code,
  bytes that do not decode, jumps into the middle of an instruction, data in executable sections,
  executable sections of other names.
- `object-unreadable`: anything that is not an x86-64 ELF relocatable object readable within the limits.

C++ symbols are judged by the qualified name read from their Itanium mangling (what the linker matches),
and every qualified name inside their demangled text (template arguments, parameters; one c++filt process
per call) is judged too, so a refused function cannot hide in an allowed template's arguments.

Imports are judged where they are used. Headers leave dead code in every object: torch/extension.h
includes pybind11, whose inline functions GCC emits (weak, in COMDAT groups) whether used or not, and
c10::cuda::CUDAGuard stores CUDAGuardImpl's vtable, whose methods create events and streams. A refused
import stands when the candidate's own code uses it or when a use is reachable from the object's entry
points (its strong and non-library symbols, load-time tables, the unwinder's personality routines, or
symbols the candidate's other objects use), following relocations, assembler-resolved branches and
fall-through between functions, but not the slots of library classes' vtables. It falls only when every
use is library-named header code that nothing reaches. Hand-written assembly that computes a jump target,
or a virtual call through a library class, can reach such code unseen: the build should link the
service's bindings object first (so its COMDAT copies of pybind11 win) and compile the candidate's units
against a torch/extension.h without torch/python.h.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Mapping, Set
from dataclasses import dataclass, field

import capstone

from evalsvc.compiler.fast_path import SHIM_INCLUDE
from evalsvc.core.results import Finding

MAX_OBJECT_BYTES = 64 << 20
MAX_CODE_BYTES = 8 << 20  # executable bytes per object: bounds the disassembly time (~20 s at most)
MAX_NAME_BYTES = 8 << 10
MAX_DEMANGLED_CHARS = 64 << 10  # substitutions can blow a short mangled name up; refuse past this
MAX_DEMANGLE_NAMES = 50_000
MAX_DEMANGLE_INPUT = 16 << 20
MAX_DEMANGLE_OUTPUT = 64 << 20
MAX_FINDINGS_PER_OBJECT = 50
DEMANGLE_TIMEOUT_S = 30.0

# The `at::_ops` structs of the operators `evalsvc.sandboxed.runtime_checks.ALLOWED_OPS` allows (allocation,
# views, layout copies, metadata): `<packet>` for the default overload, `<packet>_<overload>` otherwise.
# Derived from torch's operator registry (only operators the dispatcher knows have structs); the unit
# test regenerates it from the installed torch and fails when they differ.
ALLOWED_OP_STRUCTS = frozenset({
    "_local_scalar_dense", "_to_copy", "_to_copy_out", "_unsafe_view", "_unsafe_view_out", "alias",
    "as_strided", "chunk", "clone", "clone_out", "contiguous", "copy_", "detach", "empty_like",
    "empty_like_out", "empty_memory_format", "empty_out", "empty_strided", "empty_strided_out", "expand",
    "expand_as", "fill__Scalar", "fill__Tensor", "flatten_using_ints", "full", "full_like", "full_like_out",
    "full_out", "item", "lift_fresh", "narrow", "narrow_Tensor", "new_empty", "new_empty_out",
    "new_empty_strided", "new_empty_strided_out", "new_zeros", "new_zeros_out", "ones", "ones_like",
    "ones_like_out", "ones_out", "permute", "reshape", "reshape_as", "select_int", "slice_Tensor",
    "split_Tensor", "split_sizes", "split_with_sizes", "squeeze", "squeeze_dim", "squeeze_dims",
    "sym_numel", "sym_size_int", "sym_stride_int", "t", "to_device", "to_dtype", "to_dtype_layout",
    "to_other", "transpose_int", "type_as", "unbind_int", "unflatten_int", "unsqueeze", "view", "view_as",
    "view_dtype", "zero_", "zeros", "zeros_like", "zeros_like_out", "zeros_out",
})  # fmt: skip

RULES = frozenset({
    "object-unreadable", "symbol-aten-compute", "symbol-python", "symbol-loader", "symbol-escape",
    "symbol-vendor", "symbol-unknown", "global-constructor", "machine-code",
})  # fmt: skip

# ---------------------------------------------------------------------------------------------------
# ELF reading: strict, bounded, and fail-closed (every offset and size is checked against the bytes)

_ET_REL, _EM_X86_64 = 1, 62
_SHT_SYMTAB, _SHT_STRTAB, _SHT_RELA, _SHT_NOBITS, _SHT_REL = 2, 3, 4, 8, 9
_SHT_INIT_ARRAY, _SHT_FINI_ARRAY, _SHT_PREINIT_ARRAY, _SHT_GROUP, _SHT_SYMTAB_SHNDX = 14, 15, 16, 17, 18
_SHT_X86_64_UNWIND = 0x70000001
_SHF_WRITE, _SHF_ALLOC, _SHF_EXECINSTR = 1, 2, 4
_SHN_UNDEF, _SHN_LORESERVE, _SHN_ABS, _SHN_COMMON, _SHN_XINDEX = 0, 0xFF00, 0xFFF1, 0xFFF2, 0xFFFF
_STB_LOCAL, _STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE = 0, 1, 2, 10
_STT_NOTYPE, _STT_OBJECT, _STT_FUNC, _STT_SECTION, _STT_FILE = 0, 1, 2, 3, 4
_STT_COMMON, _STT_TLS, _STT_GNU_IFUNC = 5, 6, 10
_GRP_COMDAT = 1
# Relocations whose value is relative to the place: in code, the target is S + A + (end of the
# instruction - place), since A carries the distance from the field to the instruction's end.
_PC_RELATIVE = frozenset({2, 4, 9, 13, 15, 19, 20, 22, 24, 26, 28, 29, 34, 41, 42, 43, 44, 45, 46})
_MAX_RELOC_TYPE = 63


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


class ObjectUnreadable(Exception):
    """The bytes are not an x86-64 ELF relocatable object that the screen can read within its limits."""


@dataclass(frozen=True)
class Section:
    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int

    @property
    def alloc(self) -> bool:
        return bool(self.flags & _SHF_ALLOC)

    @property
    def executable(self) -> bool:
        return bool(self.flags & _SHF_EXECINSTR)


@dataclass(frozen=True)
class Symbol:
    index: int
    name: str
    value: int
    size: int
    type: int
    bind: int
    shndx: int
    visibility: int = 0  # STV_DEFAULT: another module's definition of the name can take its place

    @property
    def defined(self) -> bool:
        return self.shndx != _SHN_UNDEF

    @property
    def in_section(self) -> bool:
        return _SHN_UNDEF < self.shndx < _SHN_LORESERVE


@dataclass(frozen=True)
class Reloc:
    offset: int
    type: int
    symbol: int
    addend: int


@dataclass
class ElfObject:
    data: bytes
    sections: list[Section]
    symbols: list[Symbol]
    relocs: dict[int, list[Reloc]]  # target section index -> its relocations, ascending by offset
    comdat: set[int]  # sections that belong to a COMDAT group

    def content(self, sec: Section) -> bytes:
        return b"" if sec.type == _SHT_NOBITS else self.data[sec.offset : sec.offset + sec.size]


def _c_string(table: bytes, offset: int, what: str) -> str:
    """A NUL-terminated name from a string table, at most MAX_NAME_BYTES long."""
    if offset >= len(table):
        raise ObjectUnreadable(f"the name of {what} lies outside its string table")
    end = table.find(b"\0", offset, offset + MAX_NAME_BYTES + 1)
    if end < 0:
        raise ObjectUnreadable(f"the name of {what} is over the {MAX_NAME_BYTES >> 10} KiB limit")
    return table[offset:end].decode("latin-1")


def _section_headers(data: bytes) -> list[Section]:
    e_shoff, e_shentsize, e_shnum, e_shstrndx = (*struct.unpack_from("<Q", data, 40),
                                                 *struct.unpack_from("<HHH", data, 58))  # fmt: skip
    if e_shoff == 0 or e_shentsize != 64 or e_shoff + 64 > len(data):
        raise ObjectUnreadable("it has no readable section header table")
    raw = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff)]
    count = e_shnum or raw[0][5]  # extended numbering keeps the count in section 0's size
    strndx = e_shstrndx if e_shstrndx != _SHN_XINDEX else raw[0][6]
    if count < 1 or e_shoff + count * 64 > len(data):
        raise ObjectUnreadable("its section header table runs past the end of the file")
    raw += [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + 64 * i) for i in range(1, count)]
    if not 0 < strndx < count:
        raise ObjectUnreadable("it names no section-name table")
    sh_name_table = raw[strndx]
    names = data[sh_name_table[4] : sh_name_table[4] + sh_name_table[5]]
    sections = []
    for i, (name, typ, flags, _addr, off, size, link, info, _align, entsize) in enumerate(raw):
        if typ != _SHT_NOBITS and off + size > len(data):
            raise ObjectUnreadable(f"section {i} runs past the end of the file")
        label = _c_string(names, name, f"section {i}") if i else ""
        sections.append(Section(i, label, typ, flags, off, size, link, info, entsize))
    return sections


def _extended_indices(data: bytes, sections: list[Section], symtab: Section) -> list[int]:
    """SHT_SYMTAB_SHNDX: the section indices of symbols whose st_shndx is SHN_XINDEX (>65k sections)."""
    for sec in sections:
        if sec.type == _SHT_SYMTAB_SHNDX and sec.link == symtab.index:
            return [v for (v,) in struct.iter_unpack("<I", data[sec.offset : sec.offset + sec.size // 4 * 4])]
    return []


def _symbols(data: bytes, sections: list[Section]) -> tuple[Section | None, list[Symbol]]:
    tables = [s for s in sections if s.type == _SHT_SYMTAB]
    if len(tables) > 1:
        raise ObjectUnreadable("it has more than one symbol table")
    if not tables:
        return None, []
    symtab = tables[0]
    if symtab.entsize != 24 or symtab.size % 24 or not 0 < symtab.link < len(sections):
        raise ObjectUnreadable("its symbol table is malformed")
    strtab = sections[symtab.link]
    if strtab.type != _SHT_STRTAB:
        raise ObjectUnreadable("its symbol table has no string table")
    names = data[strtab.offset : strtab.offset + strtab.size]
    xindex = _extended_indices(data, sections, symtab)
    symbols = []
    entries = struct.iter_unpack("<IBBHQQ", data[symtab.offset : symtab.offset + symtab.size])
    for i, (name, info, other, shndx, value, size) in enumerate(entries):
        if shndx == _SHN_XINDEX:
            shndx = xindex[i] if i < len(xindex) else -1
        sym = Symbol(i, _c_string(names, name, f"symbol {i}") if i else "", value, size, info & 0xF,
                     info >> 4, shndx, other & 3)  # fmt: skip
        _check_symbol(sym, sections)
        symbols.append(sym)
    return symtab, symbols


def _check_symbol(sym: Symbol, sections: list[Section]) -> None:
    if sym.shndx in (_SHN_UNDEF, _SHN_ABS, _SHN_COMMON):
        return
    if not 0 < sym.shndx < len(sections):
        raise ObjectUnreadable(f"symbol {sym.index} is in a section that does not exist")
    if sym.value + sym.size > sections[sym.shndx].size:
        raise ObjectUnreadable(f"symbol {sym.index} extends past the end of its section")


def _relocations(
    data: bytes, sections: list[Section], symtab: Section | None, nsyms: int
) -> dict[int, list[Reloc]]:
    out: dict[int, list[Reloc]] = {}
    for sec in sections:
        if sec.type == _SHT_REL:
            raise ObjectUnreadable("it uses REL relocations, which x86-64 objects do not")
        if sec.type != _SHT_RELA:
            continue
        if symtab is None or sec.link != symtab.index or sec.entsize != 24 or sec.size % 24:
            raise ObjectUnreadable(f"relocation section `{sec.name}` is malformed")
        if not 0 < sec.info < len(sections):
            raise ObjectUnreadable(f"relocation section `{sec.name}` applies to no section")
        target = sections[sec.info]
        relocs = out.setdefault(target.index, [])
        for offset, info, addend in struct.iter_unpack("<QQq", data[sec.offset : sec.offset + sec.size]):
            rel = Reloc(offset, info & 0xFFFFFFFF, info >> 32, addend)
            if rel.symbol >= nsyms or rel.type > _MAX_RELOC_TYPE or rel.offset >= target.size:
                raise ObjectUnreadable(f"a relocation in `{sec.name}` is out of range")
            relocs.append(rel)
    for relocs in out.values():
        relocs.sort(key=lambda r: r.offset)
    return out


def _comdat_sections(data: bytes, sections: list[Section]) -> set[int]:
    members: set[int] = set()
    for sec in sections:
        if sec.type != _SHT_GROUP or sec.size < 4:
            continue
        words = [v for (v,) in struct.iter_unpack("<I", data[sec.offset : sec.offset + sec.size // 4 * 4])]
        if words[0] & _GRP_COMDAT:
            if any(not 0 < w < len(sections) for w in words[1:]):
                raise ObjectUnreadable(f"group `{sec.name}` names a section that does not exist")
            members.update(words[1:])
    return members


def parse_elf(data: bytes) -> ElfObject:
    """The sections, symbols and relocations of an x86-64 ELF relocatable object; ObjectUnreadable if not."""
    if len(data) > MAX_OBJECT_BYTES:
        raise ObjectUnreadable(f"it is {len(data)} bytes, over the {MAX_OBJECT_BYTES >> 20} MiB limit")
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise ObjectUnreadable("it is not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ObjectUnreadable("it is not a 64-bit little-endian ELF file")
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    if e_type != _ET_REL:
        raise ObjectUnreadable(f"it is not a relocatable object (ELF type {e_type})")
    if e_machine != _EM_X86_64:
        raise ObjectUnreadable(f"it is not x86-64 code (ELF machine {e_machine})")
    sections = _section_headers(data)
    symtab, symbols = _symbols(data, sections)
    relocs = _relocations(data, sections, symtab, len(symbols))
    return ElfObject(data, sections, symbols, relocs, _comdat_sections(data, sections))


# ---------------------------------------------------------------------------------------------------
# Qualified names from the Itanium mangling: `_ZN2at4_ops2mm4callERKNS_6TensorES4_` -> at::_ops::mm::call

_STD_ABBREVIATIONS = {
    "St": ("std",), "Sa": ("std", "allocator"), "Sb": ("std", "basic_string"), "Ss": ("std", "string"),
    "Si": ("std", "istream"), "So": ("std", "ostream"), "Sd": ("std", "iostream"),
}  # fmt: skip
# Inline namespaces say nothing about what a name is (`std::__cxx11::basic_string`, `std::chrono::_V2`).
_INLINE_NAMESPACES = frozenset({"__cxx11", "_V2", "__8", "__1", "__4"})
_BUILTIN_TYPE_CODES = frozenset("vwbcahstijlmxynofdegz")
_TYPE_QUALIFIERS = frozenset("PRKOVr")
_MAX_NESTING = 32
_OPERATOR_CODES = _words("""
    nw na dl da ps ng ad de co pl mi ml dv rm an or eo aS pL mI mL dV rM aN oR eO ls rs lS rS eq ne lt gt le
    ge ss nt aa oo pp mm cm pm pt cl ix qu cv li
    """)


class _Demangle:
    """Reads just enough of a mangled name to know the entity's qualified name (not its parameters)."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.stop = 0  # where the last nested name stopped reading (its `E`, or template arguments)

    def number(self, i: int) -> tuple[int, int]:
        j = i
        while j < len(self.s) and self.s[j].isdigit():
            j += 1
        return (int(self.s[i:j]), j) if j > i and j - i < 6 else (-1, i)

    def source_name(self, i: int) -> tuple[str | None, int]:
        length, j = self.number(i)
        if length <= 0 or j + length > len(self.s):
            return None, i
        return self.s[j : j + length], j + length

    def call_offset(self, i: int) -> int:
        """`h <n> _` or `v <n> _ <n> _` (a thunk's this-adjustment); -1 when malformed."""
        if self.s[i : i + 1] not in ("h", "v"):
            return -1
        parts, i = (1 if self.s[i] == "h" else 2), i + 1
        for _ in range(parts):
            i += self.s[i : i + 1] == "n"
            _, i = self.number(i)
            if self.s[i : i + 1] != "_":
                return -1
            i += 1
        return i

    def encoding(self, i: int, depth: int) -> tuple[str, ...] | None:
        if depth > _MAX_NESTING:
            return None
        two = self.s[i : i + 2]
        if two in ("TV", "TT", "TI", "TS", "TC"):  # vtable, VTT, typeinfo, typeinfo name, ctor vtable
            return self.type_path(i + 2, depth + 1)
        if two in ("Th", "Tv"):  # thunks: the adjusted function
            j = self.call_offset(i + 1)
            return self.encoding(j, depth + 1) if j > 0 else None
        if two == "Tc":  # covariant thunk: two adjustments
            j = self.call_offset(i + 2)
            j = self.call_offset(j) if j > 0 else -1
            return self.encoding(j, depth + 1) if j > 0 else None
        if two in ("TH", "TW", "GV", "GR"):  # TLS init/wrapper, guard variable, reference temporary
            return self.name(i + 2, depth + 1)
        if self.s.startswith(("GTt", "GTn"), i):  # transaction clones
            return self.encoding(i + 3, depth + 1)
        return self.name(i, depth)

    def type_path(self, i: int, depth: int) -> tuple[str, ...] | None:
        c = self.s[i : i + 1]
        if c in _TYPE_QUALIFIERS:  # typeinfo for `char const*`: the pointee decides
            return self.type_path(i + 1, depth + 1) if depth < _MAX_NESTING else None
        if c and (c in _BUILTIN_TYPE_CODES or c in "FAM" or self.s.startswith(("Dn", "Df", "Dd", "De"), i)):
            return ("<builtin>",)
        return self.name(i, depth)

    def name(self, i: int, depth: int) -> tuple[str, ...] | None:
        c = self.s[i : i + 1]
        if c == "N":
            return self.nested(i + 1)
        if c == "Z":  # a local entity: it belongs to its function
            return self.encoding(i + 1, depth + 1) if depth < _MAX_NESTING else None
        if self.s[i : i + 2] in _STD_ABBREVIATIONS:
            base = _STD_ABBREVIATIONS[self.s[i : i + 2]]
            if base != ("std",):
                return base
            part, _ = self.unqualified(i + 2)
            return None if part is None else ("std", part)
        part, _ = self.unqualified(i)
        return None if part is None else (part,)

    def unqualified(self, i: int) -> tuple[str | None, int]:
        """One name component: a source name (`L` marks internal linkage), an operator, a ctor or dtor."""
        if self.s[i : i + 1] == "L" and self.s[i + 1 : i + 2].isdigit():
            i += 1
        c = self.s[i : i + 1]
        if c.isdigit():
            return self.source_name(i)
        if self.s[i : i + 2] in ("C1", "C2", "C3", "C4", "C5"):
            return "<ctor>", i + 2
        if self.s[i : i + 2] in ("D0", "D1", "D2", "D4", "D5"):
            return "<dtor>", i + 2
        if self.s[i : i + 2] in _OPERATOR_CODES:
            return "operator:" + self.s[i : i + 2], i + 2
        return None, i

    def nested(self, i: int) -> tuple[str, ...] | None:
        while self.s[i : i + 1] in ("r", "V", "K", "R", "O"):  # cv- and ref-qualifiers of a method
            i += 1
        parts: list[str] = []
        if self.s[i : i + 2] in _STD_ABBREVIATIONS:
            parts, i = list(_STD_ABBREVIATIONS[self.s[i : i + 2]]), i + 2
        while i < len(self.s) and self.s[i] != "E":
            if self.s[i] == "B":  # ABI tag `[abi:cxx11]`: not part of the name
                _, j = self.source_name(i + 1)
                if j == i + 1:
                    break
                i = j
                continue
            part, j = self.unqualified(i)
            if part is None:  # template arguments, a lambda, a template parameter: the path ends here
                break
            parts.append(part)
            if part.startswith("operator:"):
                break
            i = j
        self.stop = i
        path = tuple(p for k, p in enumerate(parts) if k == 0 or p not in _INLINE_NAMESPACES)
        return path or None


def cxx_path(symbol: str) -> tuple[str, ...] | None:
    """The entity's qualified name for a C++ symbol, outermost first; None for C names and unreadable ones.

    `_ZN2at4_ops2mm4callE...` -> ('at', '_ops', 'mm', 'call'); `_ZTVSt14basic_ofstreamIcSt11char_traitsIcEE`
    -> ('std', 'basic_ofstream'); template arguments and parameters are not part of the path.
    """
    body = symbol.partition(".")[0].partition("@")[0]  # vendor suffixes (.cold) and symbol versions
    if not body.startswith("_Z") or len(body) > MAX_NAME_BYTES:
        return None
    try:
        return _Demangle(body).encoding(2, 0)
    except (ValueError, IndexError, RecursionError):
        return None


# ---------------------------------------------------------------------------------------------------
# What a symbol is: rules for C names and for C++ qualified names


@dataclass(frozen=True)
class Verdict:
    rule: str
    reason: str  # follows the symbol's name in the finding's sentence


_ATEN_WHY = "computes in ATen instead of the solution's kernel"
_DISPATCH_WHY = "looks up or dispatches ATen operators at run time instead of computing in the kernel"
_PYTHON_WHY = "is the Python C-API, pybind11 or libtorch_python: native code may not run Python"
_LOADER_WHY = "loads or looks up code at run time, out of the screen's sight"
_UNKNOWN_WHY = ("is not on the allowlist (libc/libm basics, the CUDA runtime, OpenMP, libstdc++ and the "
                "ATen/c10 allocation, view, metadata and stream API)")  # fmt: skip

_PROCESSES = "processes, signals and threads"
_FILES = "files and descriptors"
_SOCKETS = "sockets"
_ENVIRONMENT = "the environment and process identity"
_TIMERS = "timers and clocks"
_STREAMS = "side streams and CUDA graphs"
_EVENTS = "CUDA events, which time and order work outside the judge's view"
_IPC = "cross-process or host-memory mapping"
_DEVICE = "process-wide device or runtime settings"
_DRIVER = "the CUDA driver API"
_ALLOCATOR = "the caching allocator's internals (allocate through torch::empty)"


_C_ESCAPES: dict[str, frozenset[str]] = {
    _PROCESSES: _words("""
        fork vfork clone clone3 __clone execl execle execlp execv execve execvp execvpe fexecve execveat
        posix_spawn posix_spawnp system popen pclose kill killpg tgkill tkill raise ptrace prctl arch_prctl
        setrlimit setrlimit64 prlimit prlimit64 signal sigaction sigprocmask pthread_sigmask sigaltstack
        sigqueue bsd_signal sysv_signal __sysv_signal ssignal syscall wait waitpid wait3 wait4 waitid daemon
        setsid setpgid setpgrp unshare setns chroot pthread_create pthread_kill pthread_exit pthread_cancel
        exit _exit _Exit quick_exit at_quick_exit __cxa_finalize setuid seteuid setgid setegid setreuid
        setregid setresuid setresgid setgroups capset seccomp personality sched_setaffinity
        sched_setscheduler sched_setparam setpriority nice pthread_setaffinity_np omp_set_num_threads
        omp_set_dynamic omp_set_nested omp_set_max_active_levels omp_set_schedule omp_set_default_device
        """),
    _FILES: _words("""
        open open64 openat openat64 openat2 creat creat64 __open_2 __open64_2 __openat_2 __openat64_2
        name_to_handle_at open_by_handle_at fopen fopen64 freopen freopen64 fdopen tmpfile tmpfile64 mkstemp
        mkstemp64 mkostemp mkostemp64 mkstemps mkostemps mkdtemp tmpnam tmpnam_r tempnam opendir fdopendir
        readdir readdir64 readdir_r scandir scandir64 getdents getdents64 read __read_chk write pread pread64
        __pread_chk __pread64_chk pwrite pwrite64 readv writev preadv preadv2 preadv64 pwritev pwritev2
        pwritev64 close close_range closefrom dup dup2 dup3 fcntl fcntl64 __fcntl ioctl mmap mmap64 mprotect
        pkey_mprotect munmap mremap msync remap_file_pages memfd_create memfd_secret pipe pipe2 mkfifo
        mkfifoat mknod mknodat stat stat64 fstat fstat64 lstat lstat64 fstatat fstatat64 newfstatat statx
        __xstat __xstat64 __fxstat __fxstat64 __lxstat __lxstat64 __fxstatat __fxstatat64 statfs statfs64
        fstatfs fstatfs64 statvfs fstatvfs access faccessat faccessat2 euidaccess eaccess readlink readlinkat
        realpath __realpath_chk canonicalize_file_name unlink unlinkat remove rename renameat renameat2 link
        linkat symlink symlinkat mkdir mkdirat rmdir chmod fchmod fchmodat chown fchown lchown fchownat
        truncate truncate64 ftruncate ftruncate64 utime utimes futimes utimensat futimens sendfile sendfile64
        splice tee vmsplice copy_file_range process_vm_readv process_vm_writev shm_open shm_unlink shmget
        shmat shmdt shmctl semget semop msgget msgsnd msgrcv mq_open mq_send mq_receive inotify_init
        inotify_init1 inotify_add_watch fanotify_init eventfd signalfd timerfd_create userfaultfd getcwd
        get_current_dir_name chdir fchdir fsync fdatasync sync syncfs lseek lseek64 posix_fadvise fallocate
        flock lockf fread fread_unlocked __fread_chk fgets __fgets_chk fscanf __isoc99_fscanf
        __isoc23_fscanf scanf __isoc99_scanf __isoc23_scanf vscanf vfscanf getline getdelim getc
        getc_unlocked fgetc getchar gets ungetc fseek fseeko fseeko64 ftell ftello ftello64 rewind fclose
        fcloseall stdin _IO_2_1_stdin_ _IO_2_1_stdout_ _IO_2_1_stderr_
        """),
    _SOCKETS: _words("""
        socket socketpair connect bind listen accept accept4 send sendto sendmsg sendmmsg recv recvfrom
        recvmsg recvmmsg __recv_chk __recvfrom_chk shutdown setsockopt getsockopt getsockname getpeername
        poll ppoll __poll_chk __ppoll_chk select pselect epoll_create epoll_create1 epoll_ctl epoll_wait
        epoll_pwait epoll_pwait2 getaddrinfo freeaddrinfo gethostbyname gethostbyname2 gethostbyname_r
        gethostbyname2_r gethostbyaddr gethostbyaddr_r getnameinfo getservbyname inet_pton inet_aton
        res_query res_search __res_query __res_search
        """),
    _ENVIRONMENT: _words("""
        getenv secure_getenv __secure_getenv __libc_secure_getenv setenv unsetenv putenv clearenv environ
        __environ _environ program_invocation_name program_invocation_short_name __progname __progname_full
        getauxval __libc_argv __libc_argc _dl_argv __libc_stack_end __libc_enable_secure getpid getppid
        gettid getuid geteuid getgid getegid getresuid getresgid getlogin getlogin_r getpwuid getpwuid_r
        getpwnam getpwnam_r uname gethostname getdomainname sysinfo
        """),
    _TIMERS: _words("""
        clock_gettime __clock_gettime __clock_gettime64 clock_getres clock_getcpuclockid
        pthread_getcpuclockid gettimeofday time clock times ftime timespec_get timespec_getres getrusage
        timer_create timer_settime setitimer getitimer alarm ualarm omp_get_wtime omp_get_wtick
        """),
    _STREAMS: _words("""
        cudaStreamDestroy cudaLaunchHostFunc cudaStreamAddCallback cudaThreadExchangeStreamCaptureMode
        cudaStreamUpdateCaptureDependencies cudaStreamUpdateCaptureDependencies_v2
        """),
    _EVENTS: _words("cudaStreamWaitEvent cudaStreamWaitEvent_ptsz"),
    _IPC: _words("""
        cudaHostRegister cudaHostUnregister cudaHostGetDevicePointer cudaMemPoolExportToShareableHandle
        cudaMemPoolImportFromShareableHandle cudaMemPoolExportPointer cudaMemPoolImportPointer
        """),
    _DEVICE: _words("""
        cudaDeviceReset cudaThreadExit cudaDeviceSetLimit cudaThreadSetLimit cudaDeviceSetMemPool
        """),
}
_C_ESCAPE_PREFIXES: tuple[tuple[str, str], ...] = (
    ("cudaEvent", _EVENTS), ("cudaProfiler", _TIMERS), ("cupti", _TIMERS), ("cudaStreamCreate", _STREAMS),
    ("cudaGraph", _STREAMS), ("cudaStreamBeginCapture", _STREAMS), ("cudaStreamEndCapture", _STREAMS),
    ("cudaUserObject", _STREAMS), ("cudaDeviceGraphMem", _STREAMS), ("cudaDeviceGetGraphMem", _STREAMS),
    ("cudaDeviceSetGraphMem", _STREAMS), ("cudaIpc", _IPC), ("cudaImportExternal", _IPC),
    ("cudaDestroyExternal", _IPC), ("cudaSignalExternal", _IPC), ("cudaWaitExternal", _IPC),
    ("cudaExternal", _IPC), ("nvshmem", _IPC),
)  # fmt: skip
_C_ESCAPE_NAMES = {name: family for family, names in _C_ESCAPES.items() for name in names}

_C_LOADER_NAMES = _words("""
    dlopen dlmopen dlsym dlvsym dlinfo dladdr dladdr1 dlerror dlclose dl_iterate_phdr _r_debug
    __libc_dlopen_mode __libc_dlsym __libc_dlvsym __libc_dlclose cudaGetExportTable
    """)
_C_LOADER_PREFIXES = ("cuGetProcAddress", "cuModuleLoad", "cuLibraryLoad",
                      "cudaLibraryLoad", "cuLink", "nvrtc", "nvJitLink", "_dl_", "__libc_dl")  # fmt: skip
_VENDOR_PREFIXES = (("cublasLt", "cuBLASLt"), ("cublas", "cuBLAS"), ("cudnn", "cuDNN"), ("cufft", "cuFFT"),
                    ("cusparse", "cuSPARSE"), ("cusolver", "cuSOLVER"), ("cutensor", "cuTENSOR"),
                    ("curand", "cuRAND"), ("cudss", "cuDSS"))  # fmt: skip
_PYTHON_C_NAME = re.compile(r"(?:_?Py|PY|THC?P|pybind11_)[A-Za-z0-9_]")
_DRIVER_API = re.compile(r"cu[A-Z]")

_MATH = _words("""
    sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh exp exp2 exp10 expm1 log log2 log10
    log1p logb ilogb pow sqrt cbrt hypot erf erfc tgamma lgamma lgamma_r ceil floor trunc round lround
    llround rint lrint llrint nearbyint fmod remainder remquo copysign nan nextafter nexttoward fdim fmax
    fmin fma fabs frexp ldexp modf scalbn scalbln sincos significand
    """)
_C_ALLOWED = _words("""
    memcpy memmove memset memcmp memchr memrchr rawmemchr bcmp bzero strlen strnlen strcmp strncmp strcoll
    strchr strrchr strstr strpbrk strspn strcspn strcpy strncpy stpcpy strcat strncat strdup strndup
    strtok_r strerror strerror_r strtol strtoll strtoul strtoull strtod strtof strtold atoi atol atoll atof
    sscanf __isoc99_sscanf __isoc23_sscanf __isoc23_strtol __isoc23_strtoll __isoc23_strtoul
    __isoc23_strtoull snprintf sprintf vsnprintf vsprintf printf vprintf puts putchar fprintf vfprintf fputs
    fputc putc fwrite fflush perror stdout stderr malloc calloc realloc reallocarray free aligned_alloc
    posix_memalign memalign malloc_usable_size qsort qsort_r bsearch abs labs llabs div ldiv lldiv abort
    __assert_fail __stack_chk_fail __errno_location __tls_get_addr __dso_handle _GLOBAL_OFFSET_TABLE_
    __libc_single_threaded __gxx_personality_v0 __gcc_personality_v0 __dynamic_cast __once_proxy atexit
    pthread_mutex_lock pthread_mutex_unlock pthread_mutex_trylock pthread_mutex_init pthread_mutex_destroy
    pthread_mutexattr_init pthread_mutexattr_destroy pthread_mutexattr_settype pthread_once
    pthread_key_create pthread_key_delete pthread_getspecific pthread_setspecific __pthread_key_create
    isalnum isalpha isdigit isspace isupper islower isxdigit isprint ispunct toupper tolower __ctype_b_loc
    __ctype_tolower_loc __ctype_toupper_loc __isnan __isnanf __isnanl __isinf __isinff __isinfl __finite
    __finitef __finitel __fpclassify __fpclassifyf __fpclassifyl __signbit __signbitf __signbitl
    """) | {m + suffix for m in _MATH for suffix in ("", "f", "l")}
# The fast path's bridge to ATen (evalsvc/compiler/shim): the allocation, view and metadata operators the
# ATen allowlist above holds, and the current stream and device; the names as its header declares them.
_SHIM_NAMES = frozenset(
    re.findall(r"\b(evalsvc_shim_\w+)\(", (SHIM_INCLUDE / "evalsvc_torch_shim.h").read_text())
) - {"evalsvc_shim_module"}  # makes the Python module: the generated binding unit's, not the candidate's
_C_ALLOWED |= _SHIM_NAMES
_MATH_ALT = "|".join(sorted(_MATH, key=len, reverse=True))
_C_ALLOWED_PATTERN = re.compile(
    r"cuda[A-Z]\w*"  # the CUDA runtime, less what the refusals above take
    r"|__cuda(?:Register\w+|UnregisterFatBinary|PushCallConfiguration|PopCallConfiguration"
    r"|LaunchKernel(?:_ptsz)?|GetKernel|InitModule)"  # nvcc's registration and launch internals
    r"|GOMP_\w+|omp_\w+"  # OpenMP: honest CPU solutions build with -fopenmp
    r"|__cxa_\w+|_Unwind_\w+"  # the C++ ABI and the unwinder
    r"|__\w+_chk"  # _FORTIFY_SOURCE variants of allowed functions (the refused ones are listed above)
    r"|__\w+_finite[fl]?"  # -ffast-math entry points of libm
    r"|__[a-z]+(?:qi|hi|si|di|ti|sf|df|xf|tf|hf|bf|sc|dc|xc|tc)[23]"  # libgcc arithmetic helpers
)
# libmvec, the vectorised libm that -O3 -ffast-math calls: C functions with names that look mangled.
_LIBMVEC = re.compile(rf"_ZGV[a-z][NM]\d+[a-z0-9]*_(?:{_MATH_ALT})[fl]?")

# ATen's CUDA helpers that honest code uses: the current device's properties, the warp size, and
# `at::cuda::detail` (index-math checks such as canUse32BitIndexMath, the philox generator state).
_AT_CUDA_OK = frozenset({"getCurrentDeviceProperties", "getDeviceProperties", "warp_size", "is_available",
                         "getNumGPUs", "canDeviceAccessPeer", "getCurrentCUDAStream",
                         "getDefaultCUDAStream", "current_device", "device_count", "detail"})  # fmt: skip
_AT_CUDA_VENDOR = re.compile(r"(?i)blas|sparse|solver|cudnn|cudss|tunable|workspace")
_C10_DISPATCH = frozenset({"Dispatcher", "OperatorHandle", "TypedOperatorHandle", "KernelFunction",
                           "BoxedKernel", "RegisterOperators", "OperatorKernel"})  # fmt: skip
_AT_THREADS = frozenset({"set_num_threads", "set_num_interop_threads", "launch", "intraop_launch",
                         "launch_no_thread_state", "intraop_launch_future"})  # fmt: skip
_TORCH_COMPUTE = frozenset({"jit", "nn", "optim", "lazy", "dynamo", "inductor", "aot_inductor", "fx",
                            "functorch", "Library", "nativert", "export"})  # fmt: skip
_TORCH_ESCAPE = {"serialize": _FILES, "save": _FILES, "load": _FILES, "pickle_save": _FILES,
                 "pickle_load": _FILES, "data": _FILES, "distributed": _SOCKETS, "profiler": _TIMERS,
                 "multiprocessing": _PROCESSES}  # fmt: skip
_TORCH_OK = frozenset({"autograd", "headeronly", "cuda", "detail"})
_STD_ESCAPE = {"thread": _PROCESSES, "jthread": _PROCESSES, "set_terminate": _PROCESSES,
               "set_new_handler": _PROCESSES, "set_unexpected": _PROCESSES, "filesystem": _FILES,
               "basic_filebuf": _FILES, "basic_fstream": _FILES, "basic_ifstream": _FILES,
               "basic_ofstream": _FILES, "__basic_file": _FILES, "random_device": _FILES,
               "experimental": _FILES, "chrono": _TIMERS}  # fmt: skip
_GLOBAL_NEW_DELETE = frozenset({("operator:nw",), ("operator:na",), ("operator:dl",), ("operator:da",)})
_LIBRARY_NAMESPACES = frozenset({"pybind11", "at", "c10", "torch", "caffe2", "std", "__gnu_cxx",
                                 "__cxxabiv1", "cuda", "cub", "thrust"})  # fmt: skip


def _escape(family: str) -> Verdict:
    return Verdict("symbol-escape", f"reaches outside the kernel ({family})")


def _vendor(library: str, allow_vendor: bool) -> Verdict | None:
    if library == "NCCL":
        return Verdict("symbol-vendor", "is NCCL (collective communication), which no task allows")
    why = f"is a vendor library ({library}), which this task does not allow"
    return None if allow_vendor else Verdict("symbol-vendor", why)


def _vendor_library(name: str) -> str | None:
    if name.startswith("nccl"):
        return "NCCL"
    return next((library for prefix, library in _VENDOR_PREFIXES if name.startswith(prefix)), None)


def classify_c(name: str, allow_vendor: bool) -> Verdict | None:
    """The verdict on an undefined C name; None when a kernel may link to it."""
    name = name.partition("@")[0]
    if _PYTHON_C_NAME.match(name):
        return Verdict("symbol-python", _PYTHON_WHY)
    if name in _C_LOADER_NAMES or name.startswith(_C_LOADER_PREFIXES):
        return Verdict("symbol-loader", _LOADER_WHY)
    library = _vendor_library(name)
    if library is not None:
        return _vendor(library, allow_vendor)
    if name in _C_ESCAPE_NAMES:
        return _escape(_C_ESCAPE_NAMES[name])
    prefixed = next((fam for prefix, fam in _C_ESCAPE_PREFIXES if name.startswith(prefix)), None)
    if prefixed is not None:
        return _escape(prefixed)
    if _DRIVER_API.match(name):
        return _escape(_DRIVER)
    if name in _C_ALLOWED or _C_ALLOWED_PATTERN.fullmatch(name):
        return None
    return Verdict("symbol-unknown", _UNKNOWN_WHY)


def _classify_at(path: tuple[str, ...], allow_vendor: bool) -> Verdict | None:
    second = path[1] if len(path) > 1 else ""
    third = path[2] if len(path) > 2 else ""
    if second == "_ops":
        return None if third in ALLOWED_OP_STRUCTS else Verdict("symbol-aten-compute", _ATEN_WHY)
    if second == "native" and third == "getCudnnHandle":
        return _vendor("cuDNN", allow_vendor)
    if second in ("native", "cpu", "meta") or second.startswith("composite"):
        return Verdict("symbol-aten-compute", _ATEN_WHY)
    if second == "cuda":
        return _classify_at_cuda(third, allow_vendor)
    if second == "Context" and third.startswith("set"):
        return _escape(_DEVICE)
    if second in _AT_THREADS:
        return _escape(_PROCESSES)
    return None


def _classify_at_cuda(name: str, allow_vendor: bool) -> Verdict | None:
    if name in _AT_CUDA_OK:
        return None
    if _AT_CUDA_VENDOR.search(name):
        return _vendor("cuBLAS/cuSPARSE/cuSOLVER through ATen", allow_vendor)
    if name == "CUDAGraph":
        return _escape(_STREAMS)
    if name == "getCUDADeviceAllocator":
        return _escape(_ALLOCATOR)
    why = "is ATen's CUDA internals, not its current-stream and device-property functions: it " + _ATEN_WHY
    return Verdict("symbol-aten-compute", why)


def _classify_c10(path: tuple[str, ...]) -> Verdict | None:
    second = path[1] if len(path) > 1 else ""
    third = path[2] if len(path) > 2 else ""
    if second in _C10_DISPATCH or (second == "impl" and third in ("OperatorEntry", "BoxedKernelWrapper")):
        return Verdict("symbol-aten-compute", _DISPATCH_WHY)
    if second == "cuda" and third in ("getStreamFromPool", "getStreamFromExternal", "setCurrentCUDAStream"):
        return _escape(_STREAMS)
    if second == "cuda" and third in ("CUDACachingAllocator", "CUDAAllocator", "MemPool"):
        return _escape(_ALLOCATOR)
    if second == "utils" and third.endswith("_env"):
        return _escape(_ENVIRONMENT)
    if second in ("ThreadPool", "TaskThreadPool", "TaskThreadPoolBase"):
        return _escape(_PROCESSES)
    if second in ("getTime", "ApproximateClockToUnixTimeConverter"):
        return _escape(_TIMERS)
    return None


def _classify_torch(path: tuple[str, ...]) -> Verdict | None:
    second = path[1] if len(path) > 1 else ""
    third = path[2] if len(path) > 2 else ""
    if second in ("python", "utils") or any(p.startswith(("python", "Python", "THP", "Py")) for p in path):
        return Verdict("symbol-python", _PYTHON_WHY)
    if second in _TORCH_COMPUTE:
        return Verdict("symbol-aten-compute", f"runs libtorch's own modules or compilers: it {_ATEN_WHY}")
    if second in _TORCH_ESCAPE:
        return _escape(_TORCH_ESCAPE[second])
    if second == "autograd" and third in ("utils",):
        return Verdict("symbol-python", _PYTHON_WHY)
    if second == "autograd" and third in ("generated", "Engine", "backward", "grad", "Function"):
        return Verdict("symbol-aten-compute", f"runs autograd: it {_ATEN_WHY}")
    if second == "autograd" and third == "profiler":
        return _escape(_TIMERS)
    if second == "cuda" and third == "CUDAPluggableAllocator":
        return _escape(_ALLOCATOR)
    return None if second in _TORCH_OK else Verdict("symbol-unknown", _UNKNOWN_WHY)


def _classify_std(path: tuple[str, ...]) -> Verdict | None:
    family = _STD_ESCAPE.get(path[1] if len(path) > 1 else "")
    return None if family is None else _escape(family)


def classify_cxx(path: tuple[str, ...], allow_vendor: bool) -> Verdict | None:
    """The verdict on a C++ entity by its qualified name; None when a kernel may link to it."""
    root = path[0]
    if root == "pybind11" or (len(path) == 1 and _PYTHON_C_NAME.match(root)):
        return Verdict("symbol-python", _PYTHON_WHY)
    if path == ("<builtin>",) or path in _GLOBAL_NEW_DELETE:
        return None  # typeinfo of fundamental types; the global operator new/delete
    if root == "at":
        return _classify_at(path, allow_vendor)
    if root == "c10":
        return _classify_c10(path)
    if root == "torch":
        return _classify_torch(path)
    if root == "std":
        return _classify_std(path)
    if root == "__gnu_cxx":
        return _escape(_FILES) if len(path) > 1 and path[1] == "stdio_filebuf" else None
    if root in ("caffe2", "__cxxabiv1"):
        return None
    return Verdict("symbol-unknown", _UNKNOWN_WHY)


_QUALIFIED = re.compile(r"[A-Za-z_~][\w~]*(?:::[A-Za-z_~][\w~]*)+")
# Inside a name (template arguments, parameter types) only code families count: a `std::chrono::duration`
# parameter is a type, but `&at::native::mm` as a template argument is a function that runs.
_EMBEDDED_RULES = frozenset({"symbol-aten-compute", "symbol-python", "symbol-loader", "symbol-vendor"})


def classify_embedded(demangled: str, allow_vendor: bool) -> Verdict | None:
    """The first refusal among the qualified names inside a demangled name (template arguments too)."""
    for match in _QUALIFIED.finditer(demangled):
        parts = tuple(
            p for k, p in enumerate(match.group().split("::")) if k == 0 or p not in _INLINE_NAMESPACES
        )
        verdict = classify_cxx(parts, allow_vendor)
        if verdict is not None and verdict.rule in _EMBEDDED_RULES:
            return verdict
    return None


def is_library_class_table(symbol: str) -> bool:
    """The vtable or typeinfo of a library's own class (`c10::cuda::impl::CUDAGuardImpl`), not of a library
    template instantiated with the candidate's types (`std::_Sp_counted_ptr_inplace<Candidate, ...>`,
    whose slots run the candidate's code)."""
    if not symbol.startswith(("_ZTVN", "_ZTIN")):
        return False
    reader = _Demangle(symbol)
    try:
        path = reader.nested(5)
    except (ValueError, IndexError):
        return False
    return path is not None and path[0] in _LIBRARY_NAMESPACES and reader.stop == len(symbol) - 1


def is_library_name(symbol: str) -> bool:
    """A definition that header-only libraries put into every object that includes them (pybind11's inline
    functions, ATen's templates, Python.h's static inlines), as opposed to the candidate's own code."""
    path = cxx_path(symbol)
    if path is not None:  # a local entity of pybind11's extern "C" functions (pybind11_meta_dealloc's lambda)
        return path[0] in _LIBRARY_NAMESPACES or bool(_PYTHON_C_NAME.match(path[0]))
    return bool(_PYTHON_C_NAME.match(symbol.partition(".")[0]))


# ---------------------------------------------------------------------------------------------------
# Demangling for people: one c++filt process per screen


_SAFE_NAME = re.compile(r"_Z[A-Za-z0-9_.$]*")


def demangle(names: list[str]) -> dict[str, str] | None:
    """Readable names from one c++filt process; None when it is missing, fails, is slow, writes too much or
    answers out of step. Only plain mangled names (no spaces or newlines) are sent, so lines pair one to one.
    """
    todo = sorted({n.partition("@")[0] for n in names if _SAFE_NAME.fullmatch(n.partition("@")[0])})
    if not todo:
        return {}
    request = ("\n".join(todo) + "\n").encode()
    tool = shutil.which("c++filt")
    if tool is None or len(todo) > MAX_DEMANGLE_NAMES or len(request) > MAX_DEMANGLE_INPUT:
        return None
    output = _run_bounded([tool], request)
    lines = output.decode("utf-8", "replace").split("\n")[: len(todo)] if output is not None else []
    return dict(zip(todo, lines, strict=True)) if len(lines) == len(todo) else None


def _run_bounded(command: list[str], request: bytes) -> bytes | None:
    """stdout of `command` fed `request`; None when it fails, outlives DEMANGLE_TIMEOUT_S or writes more
    than MAX_DEMANGLE_OUTPUT (a crafted name can demangle to exponentially long text)."""
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stdout:
        stdin.write(request)
        stdin.seek(0)
        try:
            proc = subprocess.Popen(command, stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL)
        except OSError:
            return None
        deadline = time.monotonic() + DEMANGLE_TIMEOUT_S
        while proc.poll() is None:
            if time.monotonic() > deadline or os.fstat(stdout.fileno()).st_size > MAX_DEMANGLE_OUTPUT:
                proc.kill()
                proc.wait()
                return None
            time.sleep(0.005)
        if proc.returncode != 0 or os.fstat(stdout.fileno()).st_size > MAX_DEMANGLE_OUTPUT:
            return None
        stdout.seek(0)
        return stdout.read()


def _readable(name: str, names: Mapping[str, str]) -> str:
    text = names.get(name.partition("@")[0], name)
    text = text if len(text) <= 300 else text[:297] + "..."
    return text.encode("ascii", "backslashreplace").decode("ascii").replace("`", "'")


# ---------------------------------------------------------------------------------------------------
# Machine code: a linear sweep of every executable region, and the control flow it shows

_SYSCALL = "a system call the screen cannot see"
_SEGMENT = "a code-segment or privilege switch"
_TIMESTAMP = "a timer read by the processor"
# rdrand/rdseed: no kernel needs hardware entropy, and a result that varies between identical calls is how
# a candidate would tell the judge's calls apart.
_FORBIDDEN_INSNS = {
    "syscall": _SYSCALL, "sysenter": _SYSCALL, "sysexit": _SEGMENT, "sysret": _SEGMENT, "sysretq": _SEGMENT,
    "int1": "a debug trap", "rdtsc": _TIMESTAMP, "rdtscp": _TIMESTAMP, "rdpmc": "a performance-counter read",
    "rdpid": "the processor id (process identity)", "rdrand": "hardware randomness",
    "rdseed": "hardware randomness", "wrfsbase": "a rewrite of the thread pointer",
    "wrgsbase": "a rewrite of a segment base", "iret": _SEGMENT, "iretd": _SEGMENT, "iretq": _SEGMENT,
    "retf": _SEGMENT, "retfq": _SEGMENT, "ljmp": _SEGMENT, "lcall": _SEGMENT,
}  # fmt: skip
_TERMINATORS = frozenset({"ret", "retq", "jmp", "ud2", "hlt", "int3", "ud1", "ud0"})
_BRANCHES = frozenset({"call", "jmp", "loop", "loope", "loopne", "jrcxz", "jecxz", "xbegin"})
# Callees that never return: a function that ends calling one does not run on into the next.
_NORETURN = re.compile(
    r"exit|_exit|_Exit|quick_exit"
    r"|_Unwind_Resume|__cxa_throw|__cxa_rethrow|__cxa_bad_cast|__cxa_bad_typeid|__cxa_pure_virtual"
    r"|__cxa_throw_bad_array_new_length|__cxa_call_terminate|__stack_chk_fail|abort|__assert_fail"
    r"|_ZSt9terminatev|_ZSt\d+__throw_\w+|_ZN3c106detail14torchCheckFail\w+"
    r"|_ZN3c106detail23torchInternalAssertFail\w+|_ZN8pybind1113pybind11_failE\w+"
)
_RIP_DISPLACEMENT = re.compile(r"\[rip ([+-]) (0x[0-9a-f]+|\d+)\]")


@dataclass
class _Insn:
    start: int
    end: int
    mnemonic: str
    operands: str


@dataclass
class _CodeSection:
    """The instructions of one executable section, swept from each region's start."""

    starts: list[int] = field(default_factory=list)
    insns: list[_Insn] = field(default_factory=list)
    undecodable: list[int] = field(default_factory=list)

    def at(self, offset: int) -> _Insn | None:
        """The instruction that covers `offset`."""
        k = bisect.bisect_right(self.starts, offset) - 1
        return self.insns[k] if k >= 0 and offset < self.insns[k].end else None


def _sweep(md: capstone.Cs, code: bytes, cuts: list[int]) -> _CodeSection:
    """Disassemble [cut, next cut) for each region; record where decoding stops short."""
    out = _CodeSection()
    seen: set[int] = set()
    for start, end in itertools.pairwise(cuts):
        pos = start
        for addr, size, mnemonic, operands in md.disasm_lite(code[start:end], start):
            if addr not in seen:
                seen.add(addr)
                out.insns.append(_Insn(addr, addr + size, mnemonic, operands))
            pos = addr + size
        if pos < end:
            out.undecodable.append(pos)
    out.insns.sort(key=lambda i: i.start)
    out.starts = [i.start for i in out.insns]
    return out


def _branch_target(insn: _Insn) -> int | None:
    """The immediate target of a direct branch, or of a rip-relative operand (an address taken or read)."""
    if "rip" not in insn.operands and not insn.operands[:1].isdigit():  # capstone prints 0..9 in decimal
        return None
    direct = insn.operands.startswith("0x") or insn.operands.isdigit()
    if direct and (insn.mnemonic.split()[-1] in _BRANCHES or insn.mnemonic.startswith("j")):
        return int(insn.operands, 0)
    m = _RIP_DISPLACEMENT.search(insn.operands)
    if m:
        disp = int(m.group(2), 0)
        return insn.end + (disp if m.group(1) == "+" else -disp)
    return None


def _reloc_at(insn: _Insn, relocs: list[Reloc], offsets: list[int]) -> Reloc | None:
    """The relocation inside `insn`, if any (`offsets`: the relocations' offsets, sorted)."""
    j = bisect.bisect_left(offsets, insn.start)
    return relocs[j] if j < len(offsets) and offsets[j] < insn.end else None


def is_eh_frame(sec: Section) -> bool:
    return sec.name == ".eh_frame" or sec.type == _SHT_X86_64_UNWIND


def _is_padding(insn: _Insn) -> bool:
    word = insn.mnemonic.split()[-1]
    return word in ("nop", "int3") or (word == "xchg" and insn.operands == "ax, ax")


def _is_transfer(insn: _Insn) -> bool:
    word = insn.mnemonic.split()[-1]
    return word in _BRANCHES or word.startswith(("j", "ret", "loop", "sys", "int", "ud", "hlt"))


def _name_rank(sym: Symbol) -> tuple[bool, bool]:
    """Which of several symbols at one place names it: global over local, functions and data over labels."""
    return sym.bind != _STB_LOCAL, sym.type in (_STT_FUNC, _STT_OBJECT, _STT_GNU_IFUNC)


def _forbidden(insn: _Insn) -> str | None:
    """Why an instruction is refused, or None."""
    word = insn.mnemonic.split()[-1]
    if word == "int" and insn.operands.strip() not in ("3", "0x3"):  # int3 is a breakpoint
        return f"executes `int {insn.operands}`: {_SYSCALL}"
    if word in ("jmp", "call") and "ptr [" in insn.operands and not insn.operands.startswith("qword"):
        return f"executes a far `{word}` ({insn.operands}): {_SEGMENT}"
    why = _FORBIDDEN_INSNS.get(word)
    return None if why is None else f"executes `{word}`: {why}"


# ---------------------------------------------------------------------------------------------------
# The object's regions and what refers to what


@dataclass
class _Hit:
    rule: str
    subject: str  # the symbol (or section) the finding is about
    reason: str
    related: str = ""  # a symbol the reason names: `{related}` in it, else ", <relation> `related`"
    relation: str = "reached from"


_INIT_TABLES = re.compile(r"\.(?:init_array|ctors)(?:\.\d+)?")
_FINI_TABLES = re.compile(r"\.(?:fini_array|dtors)(?:\.\d+)?")
_CODE_SECTION_NAME = re.compile(r"\.text(?:\..*)?|\.init|\.fini")
# What an allowed initialiser may reach: nvcc's registration, and the launch internals of the kernels it
# registers (their host stubs keep the kernel handle in a guarded function-local static), GCC's
# `std::ios_base::Init` for <iostream>, exit-time registration, and the stack protector's abort (host
# compilers that enable it by default, as Ubuntu's GCC does, put it in nvcc's registration function).
_INIT_ALLOWED = re.compile(
    r"__cudaRegister\w+|__cudaUnregisterFatBinary|__cudaInitModule|__cudaPushCallConfiguration"
    r"|__cudaPopCallConfiguration|__cudaLaunchKernel(?:_ptsz)?|cudaLaunchKernel(?:_ptsz)?|__cudaGetKernel"
    r"|__cxa_guard_(?:acquire|release|abort)|_ZNSt8ios_base4InitC[12]Ev|_ZNSt8ios_base4InitD[12]Ev"
    r"|__cxa_atexit|atexit|__dso_handle|_GLOBAL_OFFSET_TABLE_|_Unwind_Resume|__stack_chk_fail(?:_local)?"
)
# GCC names its per-file initialiser after the file; nvcc's fatbinary registration is
# `__sti____cudaRegisterAll`.
_INITIALISER_NAMES = re.compile(r"_GLOBAL__sub_I_[\w.$-]*|(?:_ZL\d+)?__sti____cudaRegisterAll\w*")


class ObjectGraph:
    """Regions of the object's allocated sections (split at symbols and at the offsets that references
    point to), the references between them, and the external names each region refers to.
    `defined_elsewhere`: names the candidate's other objects define; a call to one of those never counts
    as a call that does not return (the candidate's own `exit` may return into what follows it)."""

    def __init__(self, elf: ElfObject, defined_elsewhere: Set[str] = frozenset()) -> None:
        self.elf = elf
        self.defined_elsewhere = defined_elsewhere
        self.code: dict[int, _CodeSection] = {}
        self.hits: list[_Hit] = []
        self.cuts: dict[int, set[int]] = {}
        self.succ: dict[int, set[int]] = {}
        self.ext: dict[int, set[str]] = {}
        self.keys: list[tuple[int, int]] = []
        self.starts: dict[int, list[int]] = {}
        self.node_ids: dict[tuple[int, int], int] = {}
        self.names: dict[tuple[int, int], Symbol] = {}
        self._symbol_cuts()
        self._disassemble()
        self._reference_cuts()
        self._layout()
        self._edges()

    # -- regions ---------------------------------------------------------------------------------
    def _symbol_cuts(self) -> None:
        """Regions start at symbols; a data object also ends where its symbol says (code runs on)."""
        for sec in self.elf.sections:
            if sec.alloc:
                self.cuts[sec.index] = {0, sec.size}
        for sym in self.elf.symbols:
            if sym.in_section and sym.shndx in self.cuts and sym.type not in (_STT_SECTION, _STT_FILE):
                sec = self.elf.sections[sym.shndx]
                self.cuts[sym.shndx].add(sym.value)
                if not sec.executable:
                    self.cuts[sym.shndx].add(min(sym.value + sym.size, sec.size))
                known = self.names.get((sym.shndx, sym.value))
                if sym.name and (known is None or _name_rank(sym) > _name_rank(known)):
                    self.names[(sym.shndx, sym.value)] = sym

    def _disassemble(self) -> None:
        total = sum(s.size for s in self.elf.sections if s.alloc and s.executable)
        if total > MAX_CODE_BYTES:
            raise ObjectUnreadable(f"it has {total} bytes of code, over the {MAX_CODE_BYTES >> 20} MiB limit")
        md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        for sec in self.elf.sections:
            if sec.alloc and sec.executable:
                self.code[sec.index] = _sweep(md, self.elf.content(sec), sorted(self.cuts[sec.index]))

    def _target(self, sec: Section, rel: Reloc) -> tuple[int, int] | None:
        """(section, offset) a relocation in `sec` points to, when it points into this object."""
        sym = self.elf.symbols[rel.symbol]
        if not sym.in_section or sym.shndx not in self.cuts:
            return None
        offset = sym.value + rel.addend
        code = self.code.get(sec.index)
        if rel.type in _PC_RELATIVE and code is not None:
            insn = code.at(rel.offset)
            offset += (insn.end - rel.offset) if insn is not None else 4
        return sym.shndx, offset

    def _reference_cuts(self) -> None:
        """Data sections are split where code (or an absolute pointer) points into them, so a jump table
        or a vtable is its own region."""
        for sec_index, relocs in self.elf.relocs.items():
            sec = self.elf.sections[sec_index]
            if not sec.alloc:
                continue
            for rel in relocs:
                target = self._target(sec, rel)
                code_target = target is not None and target[0] in self.code
                if target and not code_target and (sec_index in self.code or rel.type not in _PC_RELATIVE):
                    self.cuts[target[0]].add(min(max(target[1], 0), self.elf.sections[target[0]].size))

    def _layout(self) -> None:
        for sec_index, cuts in self.cuts.items():
            ordered = sorted(cuts)
            self.starts[sec_index] = ordered[:-1] if len(ordered) > 1 else ordered
            for start in self.starts[sec_index]:
                self.node_ids[(sec_index, start)] = len(self.keys)
                self.keys.append((sec_index, start))

    def node(self, sec_index: int, offset: int) -> int | None:
        starts = self.starts.get(sec_index)
        if not starts:
            return None
        k = max(bisect.bisect_right(starts, offset) - 1, 0)
        return self.node_ids[(sec_index, starts[k])]

    def span(self, node: int) -> tuple[int, int, int]:
        sec_index, start = self.keys[node]
        starts = self.starts[sec_index]
        k = bisect.bisect_right(starts, start)
        end = starts[k] if k < len(starts) else self.elf.sections[sec_index].size
        return sec_index, start, end

    def label(self, node: int) -> str:
        """The symbol that starts the region, or `section+0x..`."""
        sec_index, start, _ = self.span(node)
        sym = self.names.get((sec_index, start))
        return sym.name if sym is not None else f"{self.elf.sections[sec_index].name}+{start:#x}"

    # -- references --------------------------------------------------------------------------------
    def _link(self, src: int | None, sec_index: int, offset: int) -> None:
        dst = self.node(sec_index, offset)
        if src is not None and dst is not None:
            self.succ.setdefault(src, set()).add(dst)

    def _edges(self) -> None:
        pc_begin = self._eh_frame_pc_begin()
        for sec_index, relocs in self.elf.relocs.items():
            sec = self.elf.sections[sec_index]
            if not sec.alloc:
                continue  # debug info and notes are never loaded
            for rel in relocs:
                if (sec_index, rel.offset) not in pc_begin:
                    self._reloc_edge(sec, rel)
        for sec_index, code in self.code.items():
            self._code_edges(sec_index, code)

    def _reloc_edge(self, sec: Section, rel: Reloc) -> None:
        src = self.node(sec.index, rel.offset)
        sym = self.elf.symbols[rel.symbol]
        if not sym.defined and sym.index and src is not None:
            self.ext.setdefault(src, set()).add(sym.name)
            return
        target = self._target(sec, rel)
        if target is None:
            return
        sec_index, offset = target
        self._link(src, sec_index, offset)
        if (
            rel.type in _PC_RELATIVE
            and sec.index not in self.code
            and sec_index in self.code
            and src is not None
        ):
            # A jump table entry holds `case label - table`: the label is S + A less the entry's distance
            # from the table's start (where its region starts: code points there).
            self._link(src, sec_index, offset - (rel.offset - self.span(src)[1]))
        if sym.type != _STT_SECTION:
            self._link(src, sec_index, sym.value)

    def _code_edges(self, sec_index: int, code: _CodeSection) -> None:
        relocs = self.elf.relocs.get(sec_index, [])
        offsets = [r.offset for r in relocs]
        size = self.elf.sections[sec_index].size
        for insn in code.insns:
            target = None if _reloc_at(insn, relocs, offsets) is not None else _branch_target(insn)
            if target is None:
                continue
            if not 0 <= target <= size:
                self.hits.append(_Hit("machine-code", self._where(sec_index, insn.start),
                                      "refers outside its section without a relocation"))  # fmt: skip
                continue
            self._link(self.node(sec_index, insn.start), sec_index, target)
            landing = code.at(target)
            if landing is not None and landing.start != target:
                self.hits.append(_Hit("machine-code", self._where(sec_index, insn.start),
                                      "jumps into the middle of an instruction (code hidden from the "
                                      "disassembler)"))  # fmt: skip
        self._fall_through(sec_index, code, relocs, offsets)

    def _fall_through(
        self, sec_index: int, code: _CodeSection, relocs: list[Reloc], offsets: list[int]
    ) -> None:
        """A region whose last instruction can continue runs on into the next region; so does one that
        branches past its last instruction (into the padding before the next region: red team 9)."""
        starts = self.starts[sec_index]
        for start, end in itertools.pairwise(starts):
            last = self._last_instruction(sec_index, code, start, end)
            if last is None:
                continue
            stops = self._stops(last, relocs, offsets)
            if stops and not self._branches_past(sec_index, code, start, end, last):
                continue
            self._link(self.node_ids[(sec_index, start)], sec_index, end)

    def _stops(self, last: _Insn, relocs: list[Reloc], offsets: list[int]) -> bool:
        """`last` does not continue: a terminator, or a direct call of an imported function that does not
        return. Not one the candidate's other objects define (theirs may return), and not a relocation
        with another addend than a call's (it lands elsewhere, such as on the next PLT entry)."""
        word = last.mnemonic.split()[-1]
        if word in _TERMINATORS:
            return True
        rel = _reloc_at(last, relocs, offsets) if word == "call" else None
        if rel is None or rel.addend != -4:
            return False
        callee = self.elf.symbols[rel.symbol]
        return (
            not callee.defined
            and callee.name not in self.defined_elsewhere
            and _NORETURN.fullmatch(callee.name) is not None
        )

    def _branches_past(self, sec_index: int, code: _CodeSection, start: int, end: int, last: _Insn) -> bool:
        """Whether the region at [start, end) branches to, or takes the address of, a place after `last`."""
        sec = self.elf.sections[sec_index]
        relocs = [r for r in self.elf.relocs.get(sec_index, []) if start <= r.offset < end]
        offsets = [r.offset for r in relocs]
        lo, hi = bisect.bisect_left(code.starts, start), bisect.bisect_left(code.starts, end)
        # An instruction with a relocation shows the displacement before it is applied: its target is the
        # relocation's.
        targets = [_branch_target(i) for i in code.insns[lo:hi] if _reloc_at(i, relocs, offsets) is None]
        for rel in relocs:
            target = self._target(sec, rel)
            targets.append(target[1] if target is not None and target[0] == sec_index else None)
        return any(t is not None and last.start < t < end for t in targets)

    def _last_instruction(self, sec_index: int, code: _CodeSection, start: int, end: int) -> _Insn | None:
        """The last instruction of the function at `start` (by its symbol's size), or of whatever code that
        is not padding follows it before `end`."""
        sym = self.names.get((sec_index, start))
        body_end = start + sym.size if sym is not None and 0 < sym.size <= end - start else end
        lo, hi = bisect.bisect_left(code.starts, start), bisect.bisect_left(code.starts, end)
        insns = code.insns[lo:hi]
        trailing = [i for i in insns if i.start >= body_end and not _is_padding(i)]
        if trailing:
            return trailing[-1]
        body = [i for i in insns if i.start < body_end]
        return body[-1] if body else None

    def _where(self, sec_index: int, offset: int) -> str:
        node = self.node(sec_index, offset)
        return self.label(node) if node is not None else self.elf.sections[sec_index].name

    # -- entry points --------------------------------------------------------------------------------
    def _eh_frame_pc_begin(self) -> set[tuple[int, int]]:
        """The FDEs' `pc_begin` fields: they name the functions the unwinder describes, not code it runs.
        Every other reference in `.eh_frame` (personality routines, LSDAs) is followed; a frame table that
        does not parse leaves all of them followed."""
        fields: set[tuple[int, int]] = set()
        for sec in self.elf.sections:
            if not is_eh_frame(sec):
                continue
            data, pos = self.elf.content(sec), 0
            while pos + 8 <= len(data):
                length, cie_id = struct.unpack_from("<II", data, pos)
                if length == 0 or length == 0xFFFFFFFF or pos + 4 + length > len(data):
                    break
                if cie_id != 0:
                    fields.add((sec.index, pos + 8))
                pos += 4 + length
        return fields

    def symbol_node(self, sym: Symbol) -> int | None:
        return self.node(sym.shndx, sym.value) if sym.in_section and sym.shndx in self.starts else None

    def reach(self, roots: Mapping[int, str], skip: set[int] | None = None) -> dict[int, str]:
        """Every region reachable from the roots, with the root that reaches it; `skip` regions are
        reached but not followed."""
        seen = dict(roots)
        queue = deque(roots)
        while queue:
            node = queue.popleft()
            if skip and node in skip:
                continue
            for nxt in self.succ.get(node, ()):
                if nxt not in seen:
                    seen[nxt] = seen[node]
                    queue.append(nxt)
        return seen


# ---------------------------------------------------------------------------------------------------
# The rules, per object


@dataclass(frozen=True)
class _Usage:
    """How an import is used: whether a refusal of it stands, and which symbol to name in the finding."""

    stands: bool
    related: str = ""
    relation: str = "reached from"


@dataclass
class _ObjectResult:
    hits: list[_Hit] = field(default_factory=list)
    # Allowed C++ imports, read again once demangled -> how they are used (see ObjectScreen.usage).
    allowed_cxx: dict[str, _Usage] = field(default_factory=dict)


_PREINIT_TABLES = re.compile(r"\.preinit_array(?:\.\d+)?")


class ObjectScreen:
    """The rules over one parsed object; `defined_elsewhere`/`used_elsewhere` are the global names the
    candidate's other objects define and need."""

    def __init__(self, elf: ElfObject, allow_vendor: bool, defined_elsewhere: set[str],
                 used_elsewhere: set[str]) -> None:  # fmt: skip
        self.elf = elf
        self.allow_vendor = allow_vendor
        self.defined_elsewhere = defined_elsewhere
        self.used_elsewhere = used_elsewhere
        self.verdicts: dict[str, Verdict | None] = {}
        self.graph = ObjectGraph(elf, defined_elsewhere)
        self.result = _ObjectResult(hits=list(self.graph.hits))
        self.reached = self.graph.reach(self.roots(), skip=self._library_tables())
        self.users: dict[str, list[int]] = {}  # imported name -> the regions that refer to it
        for node, names in self.graph.ext.items():
            for name in names:
                self.users.setdefault(name, []).append(node)

    def run(self) -> _ObjectResult:
        self._machine_code()
        self._constructors()
        self._undefined()
        self._exported_library_names()
        return self.result

    def hit(self, rule: str, subject: str, reason: str, related: str = "") -> None:
        self.result.hits.append(_Hit(rule, subject, reason, related))

    # -- undefined symbols ---------------------------------------------------------------------------
    def _undefined(self) -> None:
        seen: set[str] = set()
        for sym in self.elf.symbols:
            if sym.index == 0 or sym.defined or sym.name in seen or sym.name in self.defined_elsewhere:
                continue
            seen.add(sym.name)
            verdict = self.verdict(sym.name)
            usage = self.usage(sym.name)
            if verdict is None and cxx_path(sym.name) is not None:
                self.result.allowed_cxx[sym.name] = usage
            elif verdict is not None and usage.stands:
                self.result.hits.append(
                    _Hit(verdict.rule, sym.name, verdict.reason, usage.related, usage.relation)
                )

    def usage(self, name: str) -> _Usage:
        """Whether a refusal of the import `name` stands.

        It stands when an entry point reaches a use of it, when the candidate's own code uses it, and when
        nothing loaded uses it at all (fail closed). It falls only when every use is a library's header
        code (pybind11's, c10's) that no entry point reaches, library vtables aside: `c10::cuda::CUDAGuard`
        stores `CUDAGuardImpl`'s vtable, whose inline methods create events and streams that no honest
        guard calls. Such dead code is in every object that includes the headers."""
        users = self.users.get(name, [])
        if name == "exit" and users and all(self._dead_exit(n) for n in users):
            return _Usage(False, self.graph.label(users[0]), "used by")
        root = next((self.reached[n] for n in users if n in self.reached), "")
        if root:
            return _Usage(True, root)
        own = next((self.graph.label(n) for n in users if not is_library_name(self.graph.label(n))), "")
        return _Usage(bool(own) or not users, own, "used by")

    def _dead_exit(self, node: int) -> bool:
        """nvcc's host body of a non-inline `__device__` function, `{ int volatile ___ = 1; ::exit(___); }`
        (in every object that has one): a function that nothing in the object refers to, that the
        candidate's other objects do not use under any of its names, and whose one relocation is a direct
        call of `exit` (its one transfer of control). Even called, it could only exit."""
        sec_index, start, end = self.graph.span(node)
        sym = self.graph.names.get((sec_index, start))
        here = (sec_index, start)
        names = {s.name for s in self.elf.symbols if s.in_section and (s.shndx, s.value) == here}
        if sym is None or sym.type != _STT_FUNC or names & self.used_elsewhere:
            return False
        if self.graph.succ.get(node, set()) - {node}:
            return False
        if any(node in succ for src, succ in self.graph.succ.items() if src != node):
            return False
        code = self.graph.code.get(sec_index)
        relocs = [r for r in self.elf.relocs.get(sec_index, []) if start <= r.offset < end]
        if code is None or len(relocs) != 1:
            return False
        lo, hi = bisect.bisect_left(code.starts, start), bisect.bisect_left(code.starts, end)
        insns = code.insns[lo:hi]
        transfers = [i for i in insns if _is_transfer(i)]
        (rel,) = relocs
        return (
            len(transfers) == 1
            and transfers[0].mnemonic.split()[-1] == "call"
            and _reloc_at(transfers[0], relocs, [rel.offset]) is rel
            and rel.addend == -4
            and self.elf.symbols[rel.symbol].name == "exit"
        )

    def _library_tables(self) -> set[int]:
        """Regions of library classes' vtables and typeinfo: their slots are not followed (see usage)."""
        return {
            self.graph.node_ids[key]
            for key, sym in self.graph.names.items()
            if is_library_class_table(sym.name)
        }

    def _exported_library_names(self) -> None:
        """A C function the candidate defines under a library's name (`getenv`, `PyRun_SimpleString`) is
        exported with default visibility, so the dynamic linker binds calls to it, the candidate's own
        included, to the definition the process has already loaded (libc, Python, the CUDA runtime)."""
        for sym in self.elf.symbols:
            if not sym.defined or sym.bind == _STB_LOCAL or sym.visibility or sym.name.startswith("_Z"):
                continue
            verdict = classify_c(sym.name, self.allow_vendor)
            if verdict is None or verdict.rule == "symbol-unknown":
                continue
            node = self.graph.symbol_node(sym)
            if node is None or node in self.reached or not is_library_name(sym.name):
                why = "is defined here under a library's name, so calls to it reach the library's own, which "
                self.hit(verdict.rule, sym.name, why + verdict.reason)

    def verdict(self, name: str) -> Verdict | None:
        if name not in self.verdicts:
            self.verdicts[name] = symbol_verdict(name, self.allow_vendor)
        return self.verdicts[name]

    # -- entry points --------------------------------------------------------------------------------
    def roots(self) -> dict[int, str]:
        """Where execution can enter the object, each with the name it is known by."""
        out: dict[int, str] = {}
        for sym in self.elf.symbols:
            node = self.graph.symbol_node(sym)
            if node is not None and self._is_entry(sym):
                out.setdefault(node, sym.name)
        for sec in self.elf.sections:  # load tables; the unwinder's personality routines
            if sec.alloc and (_load_table(sec) is not None or is_eh_frame(sec)):
                for start in self.graph.starts.get(sec.index, []):
                    out.setdefault(self.graph.node_ids[(sec.index, start)], sec.name)
        return out

    def _is_entry(self, sym: Symbol) -> bool:
        """Strong and non-library definitions can be called from outside; so can anything the candidate's
        other objects use. A library's weak COMDAT copy is only run through references."""
        if sym.bind == _STB_LOCAL or not sym.defined:
            return False
        if sym.name in self.used_elsewhere or sym.bind == _STB_GLOBAL or sym.type == _STT_GNU_IFUNC:
            return True
        return not (sym.shndx in self.elf.comdat and is_library_name(sym.name))

    # -- load-time code --------------------------------------------------------------------------------
    def _constructors(self) -> None:
        for sym in self.elf.symbols:
            if sym.type == _STT_GNU_IFUNC and sym.defined:
                self.hit(
                    "global-constructor", sym.name, "is an IFUNC, whose resolver runs when the library loads"
                )
        for sec in self.elf.sections:
            kind = _load_table(sec)
            if sec.executable and sec.name in (".init", ".fini"):
                self.hit(
                    "global-constructor", sec.name, "is code that runs when the library loads or unloads"
                )
            elif kind is not None:
                self._table_entries(sec, may_initialise=kind == "init")

    def _table_entries(self, sec: Section, may_initialise: bool) -> None:
        relocs = self.elf.relocs.get(sec.index, [])
        if len(relocs) * 8 < sec.size:
            self.hit("global-constructor", sec.name, "has entries without relocations (fixed addresses)")
        for rel in relocs:
            sym = self.elf.symbols[rel.symbol]
            target = self.graph._target(sec, rel)
            node = self.graph.node(*target) if target is not None else None
            if node is None:
                self.hit(
                    "global-constructor", sym.name or sec.name, f"is called from `{sec.name}` at load time"
                )
                continue
            name = self.graph.label(node)
            if may_initialise and _INITIALISER_NAMES.fullmatch(name):
                self._initialiser_reach(node, name)
            else:
                self.hit("global-constructor", name, f"runs when the library loads or unloads (`{sec.name}`)")

    def _initialiser_reach(self, node: int, name: str) -> None:
        """An allowed initialiser may only reach registration, `std::ios_base::Init` and `atexit`."""
        reached = self.graph.reach({node: name})
        names = sorted({ext for n in reached for ext in self.graph.ext.get(n, ())})
        refused = [ext for ext in names if not _INIT_ALLOWED.fullmatch(ext.partition("@")[0])]
        if refused:
            more = f" and {len(refused) - 1} more" if len(refused) > 1 else ""
            why = f"runs when the library loads and reaches `{{related}}`{more}"
            self.hit("global-constructor", name, why, refused[0])

    # -- machine code ----------------------------------------------------------------------------------
    def _machine_code(self) -> None:
        for sec in self.elf.sections:
            if sec.executable and (not _CODE_SECTION_NAME.fullmatch(sec.name) or sec.type == _SHT_NOBITS):
                self.hit("machine-code", sec.name, "is an executable section not named `.text*`")
            if sec.executable and sec.flags & _SHF_WRITE:
                self.hit("machine-code", sec.name, "is a writable executable section")
        for sym in self.elf.symbols:
            home = self.elf.sections[sym.shndx] if sym.in_section else None
            if home is not None and home.executable and sym.type in (_STT_OBJECT, _STT_TLS, _STT_COMMON):
                self.hit("machine-code", sym.name, f"is data placed in the executable section `{home.name}`")
        for sec_index, code in self.graph.code.items():
            for pos in code.undecodable:
                self.hit("machine-code", self.graph._where(sec_index, pos),
                         f"has bytes at +{pos:#x} that do not decode as x86-64 instructions")  # fmt: skip
            for insn in code.insns:
                why = _forbidden(insn)
                if why is not None:
                    self.hit("machine-code", self.graph._where(sec_index, insn.start), why)


def _load_table(sec: Section) -> str | None:
    """'init' for `.init_array`/`.ctors`, 'other' for the tables no candidate code may use, else None."""
    if sec.type in (_SHT_FINI_ARRAY, _SHT_PREINIT_ARRAY) or _FINI_TABLES.fullmatch(sec.name):
        return "other"
    if _PREINIT_TABLES.fullmatch(sec.name):
        return "other"
    if sec.type == _SHT_INIT_ARRAY or _INIT_TABLES.fullmatch(sec.name):
        return "init"
    return None


def symbol_verdict(name: str, allow_vendor: bool) -> Verdict | None:
    """The verdict on an undefined symbol by its (mangled) name; None when a kernel may link to it."""
    if _LIBMVEC.fullmatch(name.partition("@")[0]):
        return None
    path = cxx_path(name)
    if path is not None:
        return classify_cxx(path, allow_vendor)
    if name.startswith("_Z"):
        return Verdict("symbol-unknown", "is a C++ name that does not demangle, so it cannot be screened")
    return classify_c(name, allow_vendor)


# ---------------------------------------------------------------------------------------------------
# The entry point


def _definitions(elf: ElfObject) -> tuple[set[str], set[str]]:
    """(global names it defines, names it needs from elsewhere)."""
    defined = {s.name for s in elf.symbols if s.index and s.defined and s.bind != _STB_LOCAL and s.name}
    undefined = {s.name for s in elf.symbols if s.index and not s.defined and s.name}
    return defined, undefined


def _unreadable(name: str, error: Exception) -> list[_Hit]:
    reason = (
        str(error)
        if isinstance(error, ObjectUnreadable)
        else f"it could not be read ({type(error).__name__})"
    )
    return [_Hit("object-unreadable", name, f"cannot be screened: {reason}")]


def _screen_each(
    objects: Mapping[str, bytes], allow_vendor: bool
) -> tuple[dict[str, _ObjectResult], dict[str, list[_Hit]]]:
    parsed: dict[str, ElfObject] = {}
    failed: dict[str, list[_Hit]] = {}
    for name, data in objects.items():
        try:
            parsed[name] = parse_elf(bytes(data))
        except Exception as e:  # whatever the reader trips on is refused, never passed
            failed[name] = _unreadable(name, e)
    tables = {name: _definitions(elf) for name, elf in parsed.items()}
    results: dict[str, _ObjectResult] = {}
    for name, elf in parsed.items():
        defined = set().union(*(d for other, (d, _) in tables.items() if other != name))
        used = set().union(*(u for other, (_, u) in tables.items() if other != name))
        try:
            results[name] = ObjectScreen(elf, allow_vendor, defined, used).run()
        except Exception as e:
            failed[name] = _unreadable(name, e)
    return results, failed


def _embedded_hits(
    result: _ObjectResult, obj: str, names: Mapping[str, str] | None, allow_vendor: bool
) -> list[_Hit]:
    """Second look at the allowed C++ imports: what their template arguments and parameters name."""
    if names is None:
        why = ("has C++ symbols that could not be demangled (c++filt missing, failing or too slow), so their "
               "template arguments were not screened")  # fmt: skip
        return [_Hit("symbol-unknown", obj, why)] if result.allowed_cxx else []
    out = []
    for sym, usage in result.allowed_cxx.items():
        text = names.get(sym.partition("@")[0], "")
        if len(text) > MAX_DEMANGLED_CHARS:
            out.append(_Hit("symbol-unknown", sym, "demangles to an unreasonably long name"))
            continue
        verdict = classify_embedded(text, allow_vendor)
        if verdict is not None and usage.stands:
            out.append(_Hit(verdict.rule, sym, verdict.reason, usage.related, usage.relation))
    return out


def _finding(obj: str, hit: _Hit, names: Mapping[str, str]) -> Finding:
    related = _readable(hit.related, names) if hit.related else ""
    reason = hit.reason.replace("{related}", related)
    if related and "{related}" not in hit.reason:
        reason += f", {hit.relation} `{related}`"
    return Finding(rule=hit.rule, message=f"`{_readable(hit.subject, names)}` {reason}", file=obj, line=0)


def _bounded(obj: str, hits: list[_Hit], names: Mapping[str, str]) -> list[Finding]:
    """One finding per symbol and rule (per reason for machine code), at most MAX_FINDINGS_PER_OBJECT."""
    seen: set[tuple[str, str, str]] = set()
    out: list[Finding] = []
    for hit in hits:
        key = (
            hit.rule,
            hit.subject,
            hit.reason if hit.rule in ("machine-code", "global-constructor") else "",
        )
        if key not in seen and len(out) < MAX_FINDINGS_PER_OBJECT:
            seen.add(key)
            out.append(_finding(obj, hit, names))
    return out


def screen_objects(objects: Mapping[str, bytes], allow_vendor_libs: bool) -> list[Finding]:
    """Findings for the candidate's own object files (name -> ELF bytes); empty when they may be linked."""
    try:
        results, hits = _screen_each(objects, allow_vendor_libs)
        wanted = [n for r in results.values() for n in r.allowed_cxx]
        wanted += [n for r in results.values() for h in r.hits for n in (h.subject, h.related)]
        names = demangle(wanted)
        for obj, result in results.items():
            hits[obj] = _embedded_hits(result, obj, names, allow_vendor_libs) + result.hits
    except Exception as e:  # never raise on hostile input: refuse every object instead
        hits, names = {obj: _unreadable(obj, e) for obj in objects}, {}
    findings: list[Finding] = []
    for obj in objects:
        findings += _bounded(obj, hits.get(obj, []), names or {})
    return findings
