"""Callgrind's client requests from Python, and the dumps they leave: how benchmarks/instructions.py counts the
instructions of chosen regions of a process run under `valgrind --tool=callgrind --instr-atstart=no`.

A client request is a special instruction sequence that does nothing on a real CPU and that valgrind recognizes
(`valgrind.h`'s `VALGRIND_DO_CLIENT_REQUEST`). Python can't emit it, so a 40-byte function holding the x86-64
sequence is written into an executable page and called through `ctypes`: its argument, in `%rdi`, is the address
of the request's 6 words (code and 5 arguments), moved to `%rax`; the default result 0 is in `%rdx`, which valgrind
overwrites with the request's result. Outside valgrind it returns 0 and does nothing else.

The requests used (`callgrind.h`): `START_INSTRUMENTATION` (instrumentation is global: every thread of the process
is counted from then on, aiosqlite's worker threads included), `ZERO_STATS` (every thread's counts to zero) and
`DUMP_STATS_AT(label)` (every thread's counts since the last zero or dump written to a file of their own, whose
`desc: Trigger: Client Request: <label>` line names it, then zeroed). A region is a zero, the code, a dump; what
runs between regions is instrumented but never counted.

Standard library only.
"""

from __future__ import annotations

import ctypes
import mmap
import platform
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

_X86_64 = bytes.fromhex(
    '4889f8'  # mov %rdi,%rax: the request's words
    '31d2'  # xor %edx,%edx: the result when not under valgrind
    '48c1c703'  # rol $3,%rdi   \
    '48c1c70d'  # rol $13,%rdi   | valgrind's preamble: 128 bits of rotation, %rdi unchanged
    '48c1c73d'  # rol $61,%rdi   |
    '48c1c733'  # rol $51,%rdi  /
    '4887db'  # xchg %rbx,%rbx: %rdx = client_request(%rax)
    '4889d0'  # mov %rdx,%rax
    'c3'  # ret
)
_RUNNING_ON_VALGRIND = 0x1001
_CALLGRIND = ord('C') << 24 | ord('T') << 16
_ZERO_STATS = _CALLGRIND + 1
_DUMP_STATS_AT = _CALLGRIND + 3
_START_INSTRUMENTATION = _CALLGRIND + 4
_STOP_INSTRUMENTATION = _CALLGRIND + 5

_Words = ctypes.c_uint64 * 6
_TRIGGER = re.compile(r'^desc: Trigger: Client Request: (.*)$', re.MULTILINE)
_SUMMARY = re.compile(r'^summary: (\d+)$', re.MULTILINE)


def supported() -> str | None:
    """None where the client requests can be made, else why not."""
    if platform.machine() not in ('x86_64', 'AMD64'):
        return f'the client requests are written for x86-64, and this machine is {platform.machine()}'
    return None


class ClientRequests:
    """Callgrind's client requests, callable from Python."""

    def __init__(self) -> None:
        if (why := supported()) is not None:
            raise RuntimeError(why)
        self._page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        self._page.write(_X86_64)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self._page))
        self._call = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.POINTER(_Words))(address)

    def request(self, code: int, argument: int = 0) -> int:
        return int(self._call(ctypes.pointer(_Words(code, argument, 0, 0, 0, 0))))

    def running_on_valgrind(self) -> bool:
        return self.request(_RUNNING_ON_VALGRIND) > 0

    def start_instrumentation(self) -> None:
        self.request(_START_INSTRUMENTATION)

    def stop_instrumentation(self) -> None:
        self.request(_STOP_INSTRUMENTATION)

    @contextmanager
    def region(self, label: str | Callable[[], str]) -> Iterator[None]:
        """Count the instructions of the `with` block, every thread's, into a dump named `label` (one line), or
        what `label()` says once the block is done."""
        self.request(_ZERO_STATS)
        try:
            yield
        finally:
            name = ctypes.create_string_buffer((label if isinstance(label, str) else label()).encode())
            self.request(_DUMP_STATS_AT, ctypes.addressof(name))


def read_dumps(folder: Path) -> Iterator[tuple[str, int]]:
    """Each region's label and instruction count, from the dumps callgrind wrote in `folder` (the dump it writes
    when the program ends has no label and is left out)."""
    for path in sorted(folder.iterdir()):
        text = path.read_text(errors='replace')
        trigger, summary = _TRIGGER.search(text), _SUMMARY.search(text)
        if trigger is not None and summary is not None:
            yield trigger.group(1).strip(), int(summary.group(1))
