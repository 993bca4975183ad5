"""Pidfiles, start/stop/status actions and daemonizing, as carbon 1.1.10 behaves.

Messages and exit codes match the reference's CLI so init scripts keep working.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from typing import Callable


def process_alive(pid: int) -> bool:
    if os.path.exists("/proc"):
        return os.path.exists("/proc/%d" % pid)
    try:
        os.kill(pid, 0)
        return True
    except OSError as exc:
        return exc.errno == errno.EPERM


def _read_pid(pidfile: str, verb: str) -> int:
    """The pid in ``pidfile``; a corrupt file is removed and we exit 1, like the reference."""
    try:
        with open(pidfile) as handle:
            text = handle.read()
    except OSError:
        print("%s %s" % (verb, pidfile))
        raise SystemExit(1) from None
    try:
        return int(text.strip())
    except ValueError:
        print("Failed to parse pid from pidfile %s" % pidfile)
        try:
            print("removing corrupted pidfile %s" % pidfile)
            os.unlink(pidfile)
        except OSError:
            print("Could not remove pidfile %s" % pidfile)
        raise SystemExit(1) from None


def handle_action(action: str, pidfile: str, program: str, instance: str | None,
                  pid_dir: str) -> None:
    """stop and status exit here; start returns when it is fine to start."""
    if action == "stop":
        if not os.path.exists(pidfile):
            print("Pidfile %s does not exist" % pidfile)
            raise SystemExit(0)
        pid = _read_pid(pidfile, "Could not read pidfile")
        print("Sending kill signal to pid %d" % pid)
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                print("No process with pid %d running" % pid)
            else:
                raise
        raise SystemExit(0)
    if action == "status":
        if not os.path.exists(pidfile):
            print("%s (instance %s) is not running" % (program, instance))
            raise SystemExit(1)
        pid = _read_pid(pidfile, "Failed to read pid from")
        if process_alive(pid):
            print("%s (instance %s) is running with pid %d" % (program, instance, pid))
            raise SystemExit(0)
        print("%s (instance %s) is not running" % (program, instance))
        raise SystemExit(1)
    if action == "start":
        if os.path.exists(pidfile):
            pid = _read_pid(pidfile, "Could not read pidfile")
            if process_alive(pid) and pid != os.getpid():
                print("%s (instance %s) is already running with pid %d" % (program, instance, pid))
                raise SystemExit(1)
            print("Removing stale pidfile %s" % pidfile)
            try:
                os.unlink(pidfile)
            except OSError:
                print("Could not remove pidfile %s" % pidfile)
        else:
            os.makedirs(pid_dir, exist_ok=True)
        print("Starting %s (instance %s)" % (program, instance))
        return
    print("Invalid action '%s'" % action)
    print("Valid actions: start stop status")
    raise SystemExit(1)


def write_pidfile(pidfile: str) -> None:
    """Write our pid so that a reader never sees an empty or partial pidfile."""
    os.makedirs(os.path.dirname(pidfile) or ".", exist_ok=True)
    staging = "%s.%d.tmp" % (pidfile, os.getpid())
    with open(staging, "w") as handle:
        handle.write("%d" % os.getpid())
    os.replace(staging, pidfile)


def remove_pidfile(pidfile: str) -> None:
    try:
        with open(pidfile) as handle:
            if handle.read().strip() != str(os.getpid()):
                return
        os.unlink(pidfile)
    except OSError:
        pass


def daemonize() -> Callable[[int, str], None]:
    """Double-fork into the background.

    The original process waits until the daemon reports through a pipe and
    exits with its status, so ``start`` fails visibly when, say, a port is
    taken. Returns ``report(status, message)`` for the daemon to call once.
    """
    # What was printed so far ("Starting ...") leaves with the original process, which
    # ends with os._exit (no flush): flush before the children inherit a copy of it.
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    if os.fork() > 0:
        os.close(write_end)
        chunks = []
        while True:
            chunk = os.read(read_end, 4096)
            if not chunk:
                break
            chunks.append(chunk)
        data = b"".join(chunks).decode("utf-8", "replace")
        status = 1
        message = "daemon exited before it started"
        if data:
            code, _, message = data.partition(" ")
            status = int(code) if code.isdigit() else 1
        if status and message:
            print(message, file=sys.stderr)
        os._exit(status)
    os.close(read_end)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    reported = []

    def report(status: int, message: str = "") -> None:
        if reported:
            return
        reported.append(status)
        try:
            os.write(write_end, ("%d %s" % (status, message)).encode("utf-8"))
        finally:
            os.close(write_end)

    return report
