"""Process tuning for the render server: allocator thresholds and a frozen heap.

A JSON render allocates a few buffers of several MB (cells, output bytes). glibc
serves those with fresh ``mmap`` regions and unmaps them on free, so every request
pays page faults and zeroing for each one (a third of a 200-series render). Raising
the mmap and trim thresholds makes glibc reuse that memory from its heaps; the cost
is that the process keeps its peak heap size. Because of that, all threads share one
heap (``M_ARENA_MAX`` 1): glibc otherwise gives threads heaps of their own, and a
request printed by one thread while another reads its files (webapp.readahead) would
keep a peak in each. Python's small objects do not go through glibc's heaps, and large
buffers are few, so the one lock costs nothing measurable (docs/performance.md, render
memory). No-op on other C libraries.

``freeze_startup_objects`` moves everything built at start-up (modules, the function
registry, settings) out of the cyclic garbage collector's reach, so full collections
triggered by render garbage stay short.
"""

from __future__ import annotations

import ctypes
import gc
import logging

log = logging.getLogger("webapp")
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD = 32 * 1024 * 1024      # glibc's maximum on 64-bit systems
ARENA_MAX = 1
TRIM_THRESHOLD = 256 * 1024 * 1024


def keep_large_buffers() -> bool:
    """Apply the thresholds and the heap count (once per process is enough); True if
    glibc accepted them."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and bool(mallopt(M_ARENA_MAX, ARENA_MAX))
    if not done:
        log.info("malloc thresholds not applied (not glibc?)")
    return done


def freeze_startup_objects() -> None:
    """``gc.freeze()`` after a collection: start-up objects are never scanned again."""
    gc.collect()
    gc.freeze()
