"""The per-host transfer agent of a cluster: a small HTTP daemon next to the caches.

    python -m carbon.cluster.agent --storage-dir STORAGE_DIR --carbonlink HOST:PORT:INST
                                   --bind ADDR --port P

It asks its host's caches over carbonlink (cache-query-bulk) and answers:

* ``GET /list`` -- ``name size`` lines of every local whisper file;
* ``POST /files`` (names, one a line) -- per name a JSON header line (``size``, the
  ``parts`` sent as (offset, length) runs -- ``carbon.cluster.merge.segments``: header,
  first records and the points inside each archive's retention --, ``cached`` points
  held in the host's caches, asked over carbonlink; or ``missing``) then those runs'
  bytes, records as byte columns (``shuffled``), zlib-compressed (level 1, one context
  for the stream, flushed after each file; ``zlib`` in the header is the file's
  length), all in one stream;
* ``POST /pull?source=ADDR:PORT&rate=BYTES`` (names) -- stream them from another agent
  at most ``rate`` bytes/s, merge each into the local file (``carbon.cluster.merge``)
  and verify it; answers a JSON list of MergeResults;
* ``POST /delete?name=M[&unless_cached=1]`` -- remove the local copy (not while the
  host's caches still hold points of it: then ``pending`` is answered);
* ``POST /delete-many`` (``name mtime_ns read_ns`` lines: the stamps a ``/files``
  header gave) -- remove each local copy unless the caches still hold points of it
  (``pending``) or its file changed since that read, or was written within 0.1 s before
  it, when a later write in the same clock tick would not show (``changed``: pull it
  again first); a stamp of ``-1`` skips the file check (a replica that was not the
  source); answers ``{name: deleted|missing|pending|changed}``;
* ``POST /sync`` -- flush written files to disk (before old copies are removed);
* ``POST /state`` (JSON) and ``POST /moved`` (names) -- the files the relay's
  ``cluster-rebalance`` router follows (``STORAGE_DIR/rebalance/``);
* ``POST /resize?dry_run=1&files=N&bytes=N&fsync=0`` -- apply the host's schema files
  (``--conf-dir``) to its whisper files, holding the metrics on the host's caches
  (``carbon.cluster.resize``): progress lines, then one JSON line with the counts.
* ``POST /relay-reload`` (JSON ``{"destinations": [...]}``) -- SIGHUP the host's relay
  (it swaps its ring in place, ``carbon.relay.ring_swap``) and answer once its master
  and every worker process wrote a ``routing.json`` newer than the signal naming those
  destinations; 409 when the relay does not run.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator, Optional, Sequence
from urllib.parse import parse_qs, urlsplit

import numpy

from carbon.carbonlink.client import cache_query_bulk
from carbon.cluster.merge import POINT, fill_file, from_segments, segments
from carbon.cluster.resize import LocalResize, Rates
from carbon.relay.destinations import Destination, parse_destinations
from carbon.tags import filesystem_path

CHUNK = 65536
# A file written this close before its read may change unseen: file times come from the
# kernel's coarse clock (one tick, 1-10 ms, behind the fine one time.time_ns() reads).
RECENT_NS = 100_000_000


def whisper_listing(base: str) -> list[tuple[str, int]]:
    """(metric name, file size) of every whisper file under ``base``, sorted."""
    out = []
    for folder, _, files in os.walk(base):
        for file in files:
            if file.endswith(".wsp") and not file.startswith("."):
                full = os.path.join(folder, file)
                try:
                    size = os.path.getsize(full)
                except OSError:  # removed meanwhile
                    continue
                out.append((os.path.relpath(full, base)[:-4].replace(os.sep, "."), size))
    return sorted(out)


class Agent:
    """What the handler works on: the host's whisper folder and caches."""

    def __init__(self, storage_dir: str, whisper_dir: str,
                 caches: Sequence[Destination] = (), conf_dir: str | None = None) -> None:
        self.storage_dir = storage_dir
        self.whisper_dir = whisper_dir
        # storage-schemas.conf / storage-aggregation.conf (the cluster's layout: beside
        # the storage folder)
        self.conf_dir = conf_dir or os.path.join(os.path.dirname(storage_dir), "conf")
        self.caches = list(caches)  # (host, carbonlink port, instance) of the host's caches
        self.state_dir = os.path.join(storage_dir, "rebalance")

    def path(self, name: str) -> str:
        if not name or "/" in name or name.startswith(".") or ".." in name.split("."):
            raise ValueError("bad metric name %r" % name)
        return filesystem_path(self.whisper_dir, name, False)

    def listing(self) -> list[tuple[str, int]]:
        return whisper_listing(self.whisper_dir)

    def cached(self, names: list[str]) -> dict[str, list[tuple[int, float]]]:
        """Points of ``names`` still in any of the host's caches (not yet on disk)."""
        out: dict[str, dict[int, float]] = {name: {} for name in names}
        if names:
            for cache in self.caches:
                for name, points in cache_query_bulk((cache.host, cache.port), names).items():
                    if name in out:
                        out[name].update(points)
        return {name: sorted(points.items()) for name, points in out.items()}

    def source_image(self, data: bytes, cached: list) -> bytes:
        """The file's bytes with the cached points written in (whisper's update_many on a
        private copy, so every archive's aggregation is right)."""
        if not cached:
            return data
        import whisper
        handle, temp = tempfile.mkstemp(dir=self.storage_dir, prefix=".image-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            whisper.update_many(temp, [tuple(p) for p in cached])
            with open(temp, "rb") as copy:
                return copy.read()
        finally:
            os.unlink(temp)

    def write_state(self, state: dict[str, Any]) -> None:
        os.makedirs(self.state_dir, exist_ok=True)
        path = os.path.join(self.state_dir, "state.json")
        state = dict(state, moved=os.path.join(self.state_dir, "moved.txt"))
        if state.get("reset"):
            with open(state["moved"], "w"):
                pass
        with open(path + ".tmp", "w") as out:
            json.dump(state, out)
        os.replace(path + ".tmp", path)

    def _file_changed(self, name: str, stamp: tuple[int, int]) -> bool | None:
        """True when the file changed since ``stamp`` (or may have: written within
        RECENT_NS before that read, or no stamp); None when there is no file."""
        mtime_ns, read_ns = stamp
        try:
            now = os.stat(self.path(name)).st_mtime_ns
        except FileNotFoundError:
            return None
        return mtime_ns < 0 or now != mtime_ns or mtime_ns > read_ns - RECENT_NS

    def delete_many(self, stamps: dict[str, tuple[int, int]]) -> dict[str, str]:
        """Remove old copies (see ``POST /delete-many``)."""
        try:
            cached = self.cached(list(stamps))
        except Exception:  # noqa: BLE001 - a cache that cannot answer: wait
            return {name: "pending" for name in stamps}
        out = {}
        for name, stamp in stamps.items():
            if cached[name]:
                out[name] = "pending"
                continue
            if stamp[0] != -1 and self._file_changed(name, stamp):
                out[name] = "changed"
                continue
            try:
                os.unlink(self.path(name))
                out[name] = "deleted"
            except FileNotFoundError:
                out[name] = "missing"
        return out

    def reload_relay(self, destinations: list[str], timeout: float = 30.0,
                     instance: str = "a") -> str | None:
        """SIGHUP the relay, then wait for every process's routing acknowledgement;
        the problem, or None once all switched."""
        from carbon.relay.ring_swap import ACK_FILE
        try:
            with open(os.path.join(self.storage_dir, "carbon-relay-%s.pid" % instance)) as f:
                pid = int(f.read().strip())
            os.kill(pid, signal.SIGHUP)
        except (OSError, ValueError) as exc:
            return "relay not running: %s" % exc
        asked = time.time() - 0.05  # the ack's clock is this machine's too
        spool = os.path.join(self.storage_dir, "relay-spool")
        wanted = sorted(destinations)
        deadline = time.monotonic() + timeout

        def ack(folder: str) -> dict[str, Any] | None:
            try:
                with open(os.path.join(spool, folder, ACK_FILE), encoding="utf-8") as f:
                    return dict(json.load(f))
            except (OSError, ValueError):
                return None

        def current(found: dict[str, Any] | None, process: int) -> bool:
            return (found is not None and found.get("pid") == process
                    and float(found.get("time") or 0) >= asked
                    and (not wanted or sorted(found.get("destinations") or []) == wanted))

        while time.monotonic() < deadline:
            master = ack("carbon-relay-%s" % instance)
            if current(master, pid):
                assert master is not None
                workers = [int(w) for w in master.get("workers") or []]
                acks = [ack(f) for f in os.listdir(spool)
                        if f.startswith("carbon-relay-%s-w" % instance)]
                if all(any(current(a, w) for a in acks) for w in workers):
                    return None
            time.sleep(0.02)
        return "relay pid %d did not confirm the new ring within %.0f s" % (pid, timeout)

    def add_moved(self, names: list[str]) -> None:
        os.makedirs(self.state_dir, exist_ok=True)
        with open(os.path.join(self.state_dir, "moved.txt"), "a") as out:
            out.write("".join(name + "\n" for name in names))
            out.flush()
            os.fsync(out.fileno())


def parse_stamps(body: bytes) -> dict[str, tuple[int, int]]:
    """``name mtime_ns read_ns`` lines -> {name: (mtime_ns, read_ns)}."""
    out = {}
    for line in body.decode("utf-8").split("\n"):
        if line:
            name, mtime_ns, read_ns = line.rsplit(" ", 2)
            out[name] = (int(mtime_ns), int(read_ns))
    return out


def shuffled(part: memoryview) -> bytes:
    """A run of whole 12-byte records as its byte columns (every record's first byte,
    then every second byte...): timestamps a step apart and values of one series pack
    far better so; other runs (the header) as they are."""
    if len(part) % POINT.size:
        return bytes(part)
    return numpy.frombuffer(part, numpy.uint8).reshape(-1, POINT.size).T.tobytes()


def unshuffled(payload: bytes, parts: list[tuple[int, int]]) -> bytes:
    """The runs' bytes back in record order (``shuffled`` undone, part by part)."""
    out, read = [], 0
    for _, length in parts:
        piece = payload[read:read + length]
        read += length
        if length % POINT.size == 0:
            piece = numpy.frombuffer(piece, numpy.uint8).reshape(POINT.size, -1).T.tobytes()
        out.append(piece)
    return b"".join(out)


@dataclass
class Fetched:
    """One metric read from another agent: its file image (None when missing there), the
    runs that were sent (the rest of the image is zeros), the points still in that host's
    caches and the bytes the stream carried."""

    name: str
    image: bytearray | None
    parts: list[tuple[int, int]]
    cached: list
    wire_bytes: int
    stamp: tuple[int, int] = (-1, -1)  # (file mtime_ns, time_ns) on the source at its read


def fetch_many(source: str, names: list[str], rate: float, timeout: float = 120.0
               ) -> Iterator[Fetched]:
    """Each of ``names`` from the agent at ``source``, in one stream read at most ``rate``
    bytes/s (0: unlimited)."""
    host, port = source.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST", "/files", body="".join(n + "\n" for n in names).encode())
        reply = conn.getresponse()
        if reply.status != 200:
            raise OSError("%s: %d %s" % (source, reply.status, reply.read().decode()[:200]))
        got, started = 0, time.monotonic()
        unpacker = zlib.decompressobj()
        for _ in names:
            header = json.loads(reply.fp.readline())
            if header.get("missing"):
                yield Fetched(header["name"], None, [], [], 0)
                continue
            parts = [(int(o), int(n)) for o, n in header["parts"]]
            size, chunks, read = int(header["zlib"]), [], 0
            while read < size:
                chunk = reply.read(min(CHUNK, size - read))
                if not chunk:
                    raise OSError("%s: stream of %s ended at %d of %d bytes" % (
                        source, header["name"], read, size))
                chunks.append(chunk)
                read += len(chunk)
                got += len(chunk)
                if rate > 0:
                    ahead = got / rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
            image = from_segments(int(header["size"]), parts,
                                  unshuffled(unpacker.decompress(b"".join(chunks)), parts))
            yield Fetched(header["name"], image, parts, header.get("cached") or [], size,
                          (int(header.get("mtime_ns", -1)), int(header.get("read_ns", -1))))
    finally:
        conn.close()


class Handler(BaseHTTPRequestHandler):
    """The agent's HTTP answers (see the module docstring)."""

    server: AgentServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        return

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _query(self) -> dict[str, str]:
        return {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query).items()}

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        agent, route = self.server.agent, urlsplit(self.path).path
        try:
            if route == "/list":
                body = "".join("%s %d\n" % item for item in agent.listing()).encode()
                return self._send(200, body, "text/plain")
            return self._send(404, b'{"error": "unknown path"}')
        except (ValueError, OSError) as exc:
            return self._send(400, json.dumps({"error": str(exc)}).encode())

    def _stream_files(self, agent: Agent, names: list[str]) -> None:
        """Each name's JSON header line then its bytes; the connection closes at the end."""
        paths = [agent.path(name) for name in names]
        try:
            cached = agent.cached(names)
        except Exception as exc:  # noqa: BLE001 - a cache that cannot answer
            return self._send(503, json.dumps({"error": "cache query: %s" % exc}).encode())
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        packer = zlib.compressobj(1)  # one context: the files' common layout packs once
        for name, path in zip(names, paths, strict=True):
            try:
                with open(path, "rb") as handle:
                    mtime_ns, read_ns = os.fstat(handle.fileno()).st_mtime_ns, time.time_ns()
                    data = handle.read()
            except FileNotFoundError:
                self.wfile.write(json.dumps({"name": name, "missing": True}).encode() + b"\n")
                continue
            try:
                parts = segments(data)
            except ValueError:  # not a whisper file: sent whole, the receiver refuses it
                parts = [(0, len(data))]
            view = memoryview(data)
            payload = packer.compress(b"".join(shuffled(view[offset:offset + length])
                                               for offset, length in parts))
            payload += packer.flush(zlib.Z_SYNC_FLUSH)  # this file's bytes complete
            self.wfile.write(json.dumps({"name": name, "size": len(data), "parts": parts,
                                         "zlib": len(payload), "cached": cached[name],
                                         "mtime_ns": mtime_ns, "read_ns": read_ns}
                                        ).encode() + b"\n")
            for start in range(0, len(payload), CHUNK):
                self.wfile.write(payload[start:start + CHUNK])
        return None

    def _resize(self, agent: Agent, query: dict[str, str]) -> None:
        """Stream a resize's progress lines, then its counts as one JSON line."""
        rates = Rates(float(query.get("files") or 0), float(query.get("bytes") or 0),
                      query.get("fsync", "1") != "0")
        dry = query.get("dry_run", "0") not in ("", "0")
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Connection", "close")
        self.end_headers()
        out = _LineOut(self.wfile)
        resize = LocalResize(agent.whisper_dir, agent.conf_dir,
                             [(cache.host, cache.port) for cache in agent.caches], rates, out)
        try:
            report = resize.dry_run() if dry else resize.run()
            answer = dict(vars(report), summary=report.summary(dry))
        except (OSError, RuntimeError, ValueError) as exc:
            answer = {"error": str(exc)}
        self.wfile.write(b"RESULT " + json.dumps(answer).encode() + b"\n")

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        agent, route, query = self.server.agent, urlsplit(self.path).path, self._query()
        try:
            body = self._body()
            if route == "/files":
                return self._stream_files(agent, [n for n in body.decode().split("\n") if n])
            if route == "/pull":
                names = [n for n in body.decode().split("\n") if n]
                answers = []
                for got in fetch_many(query["source"], names, float(query.get("rate") or 0)):
                    if got.image is None:
                        answers.append({"name": got.name, "missing": True, "verified": False,
                                        "bytes": 0})
                        continue
                    image, parts = got.image, got.parts
                    if got.cached:
                        image = agent.source_image(bytes(image), got.cached)
                        parts = segments(image)
                    result = fill_file(agent.path(got.name), image, parts=parts)
                    answers.append(dict(vars(result), name=got.name, verified=result.verified,
                                        bytes=got.wire_bytes, mtime_ns=got.stamp[0],
                                        read_ns=got.stamp[1]))
                return self._send(200, json.dumps(answers).encode())
            if route == "/delete":
                path = agent.path(query["name"])
                if query.get("unless_cached"):
                    try:
                        pending = len(agent.cached([query["name"]])[query["name"]])
                    except Exception:  # noqa: BLE001 - a cache that cannot answer: wait
                        pending = -1
                    if pending:
                        return self._send(200, json.dumps({"pending": pending}).encode())
                try:
                    os.unlink(path)
                    deleted = True
                except FileNotFoundError:
                    deleted = False
                return self._send(200, json.dumps({"deleted": deleted}).encode())
            if route == "/resize":
                return self._resize(agent, query)
            if route == "/delete-many":
                return self._send(200, json.dumps(agent.delete_many(parse_stamps(body))
                                                  ).encode())
            if route == "/relay-reload":
                wanted = json.loads(body or b"{}").get("destinations") or []
                problem = agent.reload_relay(wanted, float(query.get("timeout") or 30))
                if problem:
                    return self._send(409, json.dumps({"error": problem}).encode())
                return self._send(200, b"{}")
            if route == "/sync":
                os.sync()  # merged files reach the disk before any old copy goes
                return self._send(200, b"{}")
            if route == "/state":
                agent.write_state(json.loads(body))
                return self._send(200, b"{}")
            if route == "/moved":
                agent.add_moved([n for n in body.decode().split("\n") if n])
                return self._send(200, b"{}")
            return self._send(404, b'{"error": "unknown path"}')
        except (KeyError, ValueError, OSError) as exc:
            return self._send(400, json.dumps({"error": "%s: %s" % (
                type(exc).__name__, exc)}).encode())


class _LineOut:
    """A text stream onto the response (progress lines as they come)."""

    def __init__(self, wfile: Any) -> None:
        self.wfile = wfile

    def write(self, text: str) -> None:
        self.wfile.write(text.encode())

    def flush(self) -> None:
        self.wfile.flush()

    def isatty(self) -> bool:
        return False


class AgentServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], agent: Agent) -> None:
        super().__init__(address, Handler)
        self.agent = agent


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="carbon-cluster-agent")
    parser.add_argument("--storage-dir", required=True, help="the host's STORAGE_DIR")
    parser.add_argument("--carbonlink", action="append", default=[], metavar="HOST:PORT:INST",
                        help="a carbon-cache of this host (its CACHE_QUERY_PORT); repeat")
    parser.add_argument("--conf-dir", help="the host's schema files (default: "
                        "STORAGE_DIR/../conf)")
    parser.add_argument("--bind", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7070)
    args = parser.parse_args(argv)
    try:
        caches = parse_destinations(args.carbonlink)
    except ValueError as exc:
        print("carbon-cluster-agent: %s" % exc, file=sys.stderr)
        return 2
    storage = os.path.abspath(args.storage_dir)
    agent = Agent(storage, os.path.join(storage, "whisper"), caches, args.conf_dir)
    server = AgentServer((args.bind, args.port), agent)
    print("carbon-cluster agent listening on %s:%d" % server.server_address[:2], flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
