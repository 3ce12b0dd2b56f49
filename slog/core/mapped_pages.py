"""Segment maps whose pages this process has touched, and letting those pages go.

Reading a memory-mapped segment maps the pages read into this process's page
tables: a batch header read while looking up an offset, or the bytes of a fetch
answer as the kernel copies them to a socket. The kernel maps whole folios
around the byte touched (seen on ext4: a 1-byte read mapped 1 MiB of a cached
file), and what is mapped counts as the process's resident memory until it is
unmapped, though it is only page cache. A consumer reading 1,000 partitions
once left about 100 KB of each resident in the broker.

``madvise(MADV_DONTNEED)`` on a read-only shared file map drops only the
page-table entries: the pages stay cached, nothing is re-read from disk, and
the next read faults them back in. Readers register the maps they touch here;
the broker's server decides when to release them (after so many bytes sent,
soon after any answer, and when a connection closes).
"""

from __future__ import annotations

import contextlib
import mmap
import threading
import weakref


class TouchedMaps:
    """Maps touched since the last :meth:`release`, held weakly (a dropped
    segment's map goes when its last view dies).

    ``generation`` changes at every release, so a reader can register a map once
    per generation instead of on every read (see ``LogSegment._touched``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the log cleaner reads segments on its own thread
        self._maps: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()
        self.generation = 0

    def touched(self, *maps: mmap.mmap) -> None:
        with self._lock:
            for mapped in maps:
                self._maps.add(mapped)

    def __bool__(self) -> bool:
        return bool(self._maps)

    def release(self) -> int:
        """Unmap the pages of every map touched since the last release; how many maps."""
        with self._lock:
            maps, self._maps = list(self._maps), weakref.WeakSet()
            self.generation += 1
        advice: int | None = getattr(mmap, "MADV_DONTNEED", None)
        if advice is not None:
            for mapped in maps:
                with contextlib.suppress(ValueError, OSError):  # closed meanwhile
                    mapped.madvise(advice)
        return len(maps)


# One per process: what a release drops is the process's page tables.
TOUCHED = TouchedMaps()
