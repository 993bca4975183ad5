"""A listening GuardedPort in a process with a 64-descriptor limit, for the EMFILE test.

Prints ``PORT <n>``, then log lines; every accepted connection is greeted with ``ok``.
The connection limit is left unplanned (infinite), so accept() itself runs out.
"""

from __future__ import annotations

import os
import resource
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from twisted.internet import reactor, task  # noqa: E402
from twisted.internet.protocol import Factory, Protocol  # noqa: E402

from carbon.config.settings import Settings  # noqa: E402
from carbon.receivers.limits import ConnectionLimit, LimitConfig, listen_tcp  # noqa: E402


class Greeter(Protocol):
    def connectionMade(self) -> None:  # noqa: N802
        self.transport.write(b"ok")


def main() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    limit = ConnectionLimit(LimitConfig.from_settings(Settings()),
                            lambda line: print(line, flush=True))
    port = listen_tcp(reactor, 0, Factory.forProtocol(Greeter), backlog=512,
                      interface="127.0.0.1", limit=limit)
    print("PORT %d" % port.getHost().port, flush=True)
    task.LoopingCall(limit.flush, 0).start(1.0, now=False)
    reactor.run()


if __name__ == "__main__":
    main()
