"""A freshly made ext4 file system for one benchmark run (``cache_bench.py --fresh-fs``).

Every run gets its own sparse image file beside its run folder, made with ``mkfs.ext4``
like the machine's root file system (4 KiB blocks, one inode per 16 KiB, or more where the
run's files need them; 256-byte inodes, no journal; inode tables written up front, so no
lazy-init thread runs during the run), attached to a loop device with direct I/O (no second
page cache over the image file) and mounted on the run folder. Unmounted, detached and
deleted when the run is measured.

Why: ext4 without a journal skips inodes freed in the last 60 s when it allocates (360 s
while their inode-table block is dirty: ``recently_deleted()`` in fs/ext4/ialloc.c), and
checks every one of them. On a shared file system a run that follows a mass deletion
pays for the earlier run's deletions, whichever daemon it measures. A new file system has
no deleted inodes and the same empty layout for every run: no order effect between runs.
Needs root (mount, losetup).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

MKFS = ["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-b", "4096", "-i", "16384",
        "-I", "256", "-E", "lazy_itable_init=0,lazy_journal_init=0,nodiscard"]


class FreshFileSystem:
    """A new ext4 on a sparse image of ``size_bytes``, mounted on ``folder`` (empty)."""

    def __init__(self, folder: Path, size_bytes: int, files: int = 0) -> None:
        self.folder = folder
        self.image = folder.with_name(folder.name + ".img")
        self.size_bytes = size_bytes
        self.files = files
        self.device: str | None = None

    def mount(self) -> None:
        """Make the image, its file system and loop device, and mount it; on failure
        what was made is removed before the error is raised."""
        for tool in ("mkfs.ext4", "losetup", "mount", "umount"):
            if shutil.which(tool) is None:
                raise RuntimeError("--fresh-fs needs %s (e2fsprogs, util-linux) and root"
                                   % tool)
        try:
            with open(self.image, "wb") as image:
                image.truncate(self.size_bytes)
            subprocess.run([*MKFS, *inode_option(self.size_bytes, self.files),
                            str(self.image)], check=True)
            self.device = subprocess.run(
                ["losetup", "--direct-io=on", "--find", "--show", str(self.image)],
                check=True, capture_output=True, text=True).stdout.strip()
            subprocess.run(["mount", self.device, str(self.folder)], check=True)
        except BaseException:
            self.remove()
            raise

    def remove(self) -> None:
        """Unmount (writing back what is dirty), detach and delete the image."""
        if self.device is not None:
            subprocess.run(["umount", str(self.folder)], check=False)
            subprocess.run(["losetup", "--detach", self.device], check=False)
            self.device = None
        self.image.unlink(missing_ok=True)


def inode_option(size_bytes: int, files: int) -> list[str]:
    """``-N`` (inode count) when one inode per 16 KiB would not hold ``files`` files and
    their directories (small files: the 1M-metric load of 4.3 KB files), else nothing."""
    needed = int(files * 1.05) + 10_000
    return ["-N", str(needed)] if size_bytes // 16384 < needed else []


def image_bytes(files: int, file_bytes: int) -> int:
    """An image big enough for ``files`` files of ``file_bytes`` (plus their directories,
    inode tables and a margin)."""
    return int(files * (file_bytes + 4096) * 1.25) + (2 << 30)
