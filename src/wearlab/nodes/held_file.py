"""Bytes a node's process holds in its own user-space buffers, kept where a process outside it can
read them at once: a file of little-endian int64, one per name in a fixed order, mmap'ed by the
writer. The kernel shows what sockets and qdiscs hold; what a proxy or an agent holds between
its sockets only it knows. Written by wearlab's relay (per direction: relay.HeldBytes) and the
multipath agents (per path); read by the interface selector every poll and the live d3."""

from __future__ import annotations

import mmap
import os
import struct
import threading
from collections.abc import Sequence


class HeldFile:
    """`names`' counts in the file at `path` (none: counted in memory only)."""

    def __init__(self, path: str | os.PathLike[str] | None, names: Sequence[str]):
        self.names = tuple(names)
        self.counts = dict.fromkeys(self.names, 0)
        self.mm: mmap.mmap | None = None
        self.lock = threading.Lock()     # the relay's pumps are threads
        if path:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.ftruncate(fd, 8 * len(self.names))
                self.mm = mmap.mmap(fd, 8 * len(self.names))
            finally:
                os.close(fd)

    def add(self, name: str, n: int) -> None:
        if self.mm is None or not n:
            return
        with self.lock:
            self.counts[name] += n
            struct.pack_into("<q", self.mm, 8 * self.names.index(name), self.counts[name])

    def set(self, name: str, value: int) -> None:
        if self.mm is None or self.counts[name] == value:
            return
        with self.lock:
            self.counts[name] = value
            struct.pack_into("<q", self.mm, 8 * self.names.index(name), value)


def read_held_file(path: str | os.PathLike[str], names: Sequence[str]) -> dict[str, int]:
    """A HeldFile's counts by name (zeros before its writer has sized it)."""
    with open(path, "rb") as f:
        data = f.read(8 * len(names))
    if len(data) < 8 * len(names):
        return dict.fromkeys(names, 0)
    return dict(zip(names, struct.unpack(f"<{len(names)}q", data)))
