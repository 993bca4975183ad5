"""Destination strings (``host:port[:instance]``, ``[::1]:2004:a``) and their tuples.

Shared by the relay, the aggregator, the render app (CARBONLINK_HOSTS) and the tools.
A destination is a ``(host, port, instance)`` tuple exactly as carbon 1.1.10's
``parseDestination`` returns it: ``instance`` is None when the string has none.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple


class Destination(NamedTuple):
    """One relay destination; equal to (and hashes like) the reference's triple."""

    host: str
    port: int
    instance: str | None = None

    def __str__(self) -> str:
        host = "[%s]" % self.host if ":" in self.host else self.host
        if self.instance is None:
            return "%s:%d" % (host, self.port)
        return "%s:%d:%s" % (host, self.port, self.instance)

    @property
    def stat_name(self) -> str:
        """The reference's metric-name form: ``127_0_0_1:2004:a`` (``:None`` when no
        instance), used in ``destinations.<name>.sent`` and friends."""
        return ("%s:%d:%s" % (self.host, self.port, self.instance)).replace(".", "_")


def parse_destination(text: str) -> Destination:
    """Parse ``host:port[:instance]``; IPv6 hosts go in brackets: ``[::1]:2004:a``.

    Raises ValueError naming the string when it is not a destination.
    """
    s = text.strip()
    if s.startswith("["):
        close = s.rfind("]:")
        if close < 0:
            raise ValueError('Invalid destination string "%s" (expected [ipv6]:port)' % text)
        host, rest = s[1:close], s[close + 2:]
    else:
        colon = s.find(":")
        if colon < 0:
            raise ValueError('Invalid destination string "%s" (expected host:port)' % text)
        host, rest = s[:colon], s[colon + 1:]
    port_text, sep, instance = rest.partition(":")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError('Invalid destination string "%s" (port %r is not a number)'
                         % (text, port_text)) from None
    if not host or not 0 < port < 65536:
        raise ValueError('Invalid destination string "%s"' % text)
    return Destination(host, port, instance if sep else None)


def parse_destinations(texts: Iterable[str]) -> list[Destination]:
    """Parse a DESTINATIONS list (entries may also be comma-separated strings)."""
    out: list[Destination] = []
    for text in texts:
        for part in text.split(","):
            if part.strip():
                out.append(parse_destination(part))
    return out


# Reference spellings, for code ported from carbon.util.
parseDestination = parse_destination  # noqa: N816
parseDestinations = parse_destinations  # noqa: N816
