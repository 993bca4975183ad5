"""A discarding TCP sink that counts what it receives (to show the load generator is
never the bottleneck): ``python -m carbon.playground.discard --port-file FILE``."""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time


def serve(sock: socket.socket, counts: dict[str, int], lock: threading.Lock) -> None:
    """Accept connections and count the bytes and newlines each sends."""
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        threading.Thread(target=_drain, args=(conn, counts, lock), daemon=True).start()


def _drain(conn: socket.socket, counts: dict[str, int], lock: threading.Lock) -> None:
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    lines = size = 0
    with conn:
        while True:
            got = conn.recv_into(buffer)
            if not got:
                break
            size += got
            lines += view[:got].tobytes().count(b"\n")
            if size > 1 << 24:
                with lock:
                    counts["bytes"] += size
                    counts["lines"] += lines
                size = lines = 0
    with lock:
        counts["bytes"] += size
        counts["lines"] += lines
        counts["closed"] += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--connections", type=int, default=1,
                        help="exit after this many connections closed")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    sock = socket.socket()
    sock.bind(("127.0.0.1", args.port))
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)
    counts = {"bytes": 0, "lines": 0, "closed": 0}
    lock = threading.Lock()
    threading.Thread(target=serve, args=(sock, counts, lock), daemon=True).start()
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        with lock:
            if counts["closed"] >= args.connections:
                break
        time.sleep(0.05)
    print(json.dumps(counts), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
