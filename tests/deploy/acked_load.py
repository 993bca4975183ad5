"""A bounded plaintext load whose sender knows which points the daemon read.

Carbon's plaintext protocol has no acknowledgement, so the sender makes one out of the
connection's end: each batch of lines travels on a connection of its own; the sender
writes it, half-closes (FIN) and reads until the daemon closes too. The batch counts as
*acknowledged* only if that close is clean: no error from connect, write, shutdown or
read, and ``SO_ERROR`` still 0 afterwards. Why that proves the daemon's process read
every byte: a daemon closes its side after it has read our FIN (carbon 1.1.10's line
receiver, and ours, also while shutting down), or on its own (its process exits) when
nothing is unread; a socket closed with unread bytes, or one that bytes reach after its
close, makes the kernel answer with a reset, which surfaces as an error of the write,
the shutdown or the read, or (when the daemon's FIN was read before the reset arrived)
as ``SO_ERROR``. A batch that is not acknowledged (refused, reset, timed out) is sent
again on a new connection, as senders with a retry buffer do; a point therefore may be
read twice, which is harmless (same timestamp, same value: whisper writes the same
bytes).

What "acknowledged" does not prove is that the daemon *kept* what it read: that is
what the upgrade test checks in whisper.
"""

from __future__ import annotations

import collections
import errno
import os
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import read_whisper


@dataclass
class Batch:
    """Lines for one connection, and the points they carry."""

    number: int
    payload: bytes
    points: list[tuple[str, int, float]]
    attempts: int = 0
    acked_at: float | None = None  # time.monotonic() of the clean close
    leg: str = ""  # the phase the test was in when it was acknowledged


@dataclass
class Metric:
    name: str
    step: int  # seconds between this metric's timestamps (its schema's finest step)
    first: int  # timestamp of its first point


def full_precision_value(rng: random.Random) -> float:
    """A float of any magnitude, all 17 significant digits (repr round-trips it)."""
    return rng.uniform(-1.0, 1.0) * 10.0 ** rng.randint(-6, 9)


def make_batches(metrics: list[Metric], per_metric: int, batch_points: int,
                 seed: int = 28) -> list[Batch]:
    """``per_metric`` points for every metric, k-th point at ``first + k * step``, in
    timestamp-major order cut into batches of ``batch_points`` lines (a batch mixes
    many metrics, as a collector's flush does)."""
    rng = random.Random(seed)
    points = [(m.name, m.first + k * m.step, full_precision_value(rng))
              for k in range(per_metric) for m in metrics]
    batches = []
    for number, start in enumerate(range(0, len(points), batch_points)):
        part = points[start:start + batch_points]
        payload = b"".join(b"%s %r %d\n" % (name.encode(), value, stamp)
                           for name, stamp, value in part)
        batches.append(Batch(number, payload, part))
    return batches


def deliver(port: int, payload: bytes, pause: float, timeout: float = 10.0) -> str | None:
    """Send ``payload`` on a new connection (in two halves ``pause`` seconds apart, so
    connections are open across a stop) and close it; None when acknowledged (module
    docstring), else why not."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except ConnectionRefusedError:
        return "refused"
    except OSError as exc:
        return "connect: %s" % (exc.strerror or exc)
    cut = payload.find(b"\n", len(payload) // 2) + 1
    with sock:
        try:
            sock.sendall(payload[:cut])
            time.sleep(pause)
            sock.sendall(payload[cut:])
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass  # a daemon says nothing on this port; read to its FIN
        except TimeoutError:
            return "timeout"
        except OSError as exc:
            return "closed: %s" % errno.errorcode.get(exc.errno or 0, str(exc))
        error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            return "reset after FIN: %s" % errno.errorcode.get(error, str(error))
    return None


class AckedSender:
    """``connections`` threads send the batches, each first tried no earlier than
    ``rate`` batches a second from the start; a batch not acknowledged goes back to the
    front of the queue and is tried again after ``retry`` seconds. ``hold()`` stops new
    connections from being opened (those open finish) until ``release()``.
    Bounded: every thread gives up at ``limit`` seconds."""

    def __init__(self, port: int, batches: list[Batch], rate: float, connections: int = 4,
                 pause: float = 0.05, retry: float = 0.1, limit: float = 300.0) -> None:
        self.port, self.batches, self.rate = port, batches, rate
        self.pause, self.retry, self.limit = pause, retry, limit
        self.queue: collections.deque[Batch] = collections.deque(batches)
        self.lock = threading.Lock()
        self.leg = ""
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.in_flight = 0
        self.released = threading.Event()
        self.released.set()
        self.threads = [threading.Thread(target=self._run, daemon=True, name="sender-%d" % i)
                        for i in range(connections)]
        self.began = 0.0
        self.errors: list[BaseException] = []

    def start(self) -> None:
        self.began = time.monotonic()
        for thread in self.threads:
            thread.start()

    def hold(self) -> None:
        self.released.clear()

    def release(self) -> None:
        self.released.set()

    def idle(self) -> bool:
        """No connection open (after ``hold()``: the daemon gets nothing more)."""
        with self.lock:
            return self.in_flight == 0

    def acked(self, leg: str | None = None) -> list[Batch]:
        with self.lock:
            return [b for b in self.batches if b.acked_at is not None
                    and (leg is None or b.leg == leg)]

    def done(self) -> bool:
        return all(b.acked_at is not None for b in self.batches)

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _next(self) -> Batch | None:
        while time.monotonic() - self.began < self.limit:
            self.released.wait(0.1)
            if not self.released.is_set():
                continue
            with self.lock:
                if not self.queue:
                    return None
                batch = self.queue[0]
                due = self.began + batch.number / self.rate
                if batch.attempts == 0 and time.monotonic() < due:
                    wait = due - time.monotonic()
                else:
                    self.queue.popleft()
                    self.in_flight += 1
                    return batch
            time.sleep(min(wait, 0.05))
        raise TimeoutError("sender ran past %.0f s with %d batches unacknowledged"
                           % (self.limit, len(self.queue)))

    def _run(self) -> None:
        try:
            while True:
                batch = self._next()
                if batch is None:
                    return
                batch.attempts += 1
                why = deliver(self.port, batch.payload, self.pause)
                with self.lock:
                    self.in_flight -= 1
                    self.outcomes[why or "acknowledged"] += 1
                    if why is None:
                        batch.acked_at = time.monotonic()
                        batch.leg = self.leg
                    else:
                        self.queue.appendleft(batch)
                if why is not None:
                    time.sleep(self.retry)
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)


def whisper_path(data_dir: Path, name: str) -> Path:
    return data_dir / (name.replace(".", os.sep) + ".wsp")


def count_stored(data_dir: Path, batches: list[Batch]) -> tuple[int, int, list[str]]:
    """(points of ``batches`` in whisper with the value sent, points there with another
    value, a few examples of missing or wrong points). Files are read directly."""
    wanted: dict[str, dict[int, float]] = collections.defaultdict(dict)
    for batch in batches:
        for name, stamp, value in batch.points:
            wanted[name][stamp] = value
    good = wrong = 0
    examples: list[str] = []
    for name, points in wanted.items():
        stored = read_whisper(whisper_path(data_dir, name), min(points) - 1, max(points) + 1)
        for stamp, value in points.items():
            got = stored.get(stamp)
            if got is not None and struct.pack("d", got) == struct.pack("d", value):
                good += 1
            else:
                wrong += got is not None
                if len(examples) < 5:
                    examples.append("%s %d: sent %r, stored %r" % (name, stamp, value, got))
    return good, wrong, examples


@dataclass
class LegCount:
    """Points acknowledged in one direction of the switch, and what whisper holds."""

    leg: str
    sent: int = 0
    stored: int = 0
    wrong: int = 0
    examples: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return self.sent - self.stored

    def line(self) -> str:
        return "%s: sent %d, stored %d, lost %d" % (self.leg, self.sent, self.stored,
                                                    self.lost)
