"""Counting destinations for the relay benchmark: one process, several ports.

    python bench/relay_sink.py --listen 2004:pickle,2104:line --control 7100 [--record DIR]

Counts datapoints per port (pickle frames are unpickled and their items counted;
plaintext counts newline-terminated lines) and answers on the control port: a
client connects, and receives one JSON object ``{"<port>": points, ...}``. With
``--record``, every byte a connection receives is also appended to
``DIR/<port>.<n>`` (n counts the port's connections; one file each, so that a relay
with several connections to a port, RELAY_WORKERS > 1, is not recorded interleaved;
flushed before each control answer), so the benchmark can check what arrived where.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import struct
from typing import Any

_LENGTH = struct.Struct("!L")


class Counter(asyncio.Protocol):
    def __init__(self, counts: dict[str, int], port: str, protocol: str,
                 records: list[Any] | None, folder: str | None) -> None:
        self.counts = counts
        self.port = port
        self.pickle = protocol == "pickle"
        self.buffer = b""
        self.record = None
        if folder is not None and records is not None:
            self.record = open(os.path.join(folder, "%s.%d" % (port, len(records))), "ab")
            records.append(self.record)

    def data_received(self, data: bytes) -> None:
        if self.record is not None:
            self.record.write(data)
        if not self.pickle:
            self.counts[self.port] += data.count(b"\n")
            return
        buffer = self.buffer + data if self.buffer else data
        offset, size, found = 0, len(buffer), 0
        while size - offset >= 4:
            (length,) = _LENGTH.unpack_from(buffer, offset)
            if size - offset - 4 < length:
                break
            found += len(pickle.loads(buffer[offset + 4:offset + 4 + length]))
            offset += 4 + length
        self.buffer = buffer[offset:]
        self.counts[self.port] += found


class Control(asyncio.Protocol):
    def __init__(self, counts: dict[str, int], records: list[Any]) -> None:  # live list
        self.counts = counts
        self.records = records

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        for record in self.records:
            record.flush()
        transport.write(json.dumps(self.counts).encode())  # type: ignore[attr-defined]
        transport.close()


async def serve(listen: list[tuple[int, str]], control: int, record: str | None) -> None:
    loop = asyncio.get_running_loop()
    counts = {str(port): 0 for port, _ in listen}
    live: list[Any] = []  # one record file a connection, in the order they came
    servers = []
    for port, protocol in listen:
        servers.append(await loop.create_server(
            lambda p=str(port), k=protocol: Counter(counts, p, k, live, record),
            "127.0.0.1", port))
    servers.append(await loop.create_server(lambda: Control(counts, live), "127.0.0.1",
                                            control))
    print("READY", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True, help="port:protocol,...")
    parser.add_argument("--control", type=int, required=True)
    parser.add_argument("--record", help="a folder: keep each port's bytes in DIR/<port>")
    args = parser.parse_args()
    listen = [(int(p), k) for p, k in (item.split(":") for item in args.listen.split(","))]
    asyncio.run(serve(listen, args.control, args.record))


if __name__ == "__main__":
    main()
