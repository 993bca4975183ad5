"""The render process's allocator tuning (webapp.process_tuning), in a fresh process."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import ctypes, sys, threading
import numpy as np
from webapp.process_tuning import keep_large_buffers
if sys.argv[1] == "tuned":
    assert keep_large_buffers()
held = []
def work():
    # 1 MB buffers: served from a glibc heap once the mmap threshold is raised
    blocks = [np.ones(1 << 17) for _ in range(8)]
    held.append(sum(float(b[0]) for b in blocks))
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
ctypes.CDLL(None).malloc_stats()
'''


@pytest.mark.skipif(platform.libc_ver()[0] != 'glibc', reason='glibc allocator tuning')
def test_threads_share_one_heap_once_tuned() -> None:
    """Without the tuning glibc gives the worker threads heaps of their own (each keeps
    its peak); with it (M_ARENA_MAX 1, as a streamed json answer's threads need) every
    thread allocates from the one heap."""
    def heaps(mode: str) -> int:
        done = subprocess.run([sys.executable, '-c', SCRIPT, mode], cwd=str(ROOT),
                              capture_output=True, text=True, timeout=60, check=True)
        return sum(1 for line in done.stderr.splitlines() if line.startswith('Arena '))
    assert heaps('tuned') == 1
    assert heaps('plain') > 1
