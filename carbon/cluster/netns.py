"""Optional network-namespace placement of hosts (``netns = true``; needs root and ``ip``).

Each such host gets its own namespace joined to one bridge by a veth pair; the bridge
holds the .254 address of the host's /24 so this machine reaches every host. Cutting the
veth (``cut``) partitions the host; ``heal`` joins it again. Hosts without ``netns``
run in the current namespace on their (usually 127.0.0.N) address.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess

from carbon.cluster.spec import ClusterSpec, HostSpec


def available() -> bool:
    """True when namespaces can be made here (root and the ``ip`` tool)."""
    return os.geteuid() == 0 and shutil.which("ip") is not None


def names(spec: ClusterSpec, host: HostSpec) -> tuple[str, str, str, str]:
    """(namespace, bridge, veth outside, veth inside); interface names fit in 15 bytes."""
    short = (spec.netns_prefix + host.name)[:12]
    return (spec.netns_prefix + host.name, (spec.netns_prefix + "br")[:15], short + "-o",
            short + "-i")


def exec_prefix(spec: ClusterSpec, host: HostSpec) -> list[str]:
    return ["ip", "netns", "exec", names(spec, host)[0]] if host.netns else []


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def up(spec: ClusterSpec, host: HostSpec) -> None:
    """Create ``host``'s namespace, veth and the shared bridge (idempotent)."""
    if not host.netns:
        return
    if not available():
        raise RuntimeError("host %s asks for netns: needs root and the ip tool" % host.name)
    ns, bridge, outside, inside = names(spec, host)
    network = ipaddress.ip_network(host.address + "/24", strict=False)
    if _ip("link", "show", bridge, check=False).returncode != 0:
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", "%s/24" % network[254], "dev", bridge)
        _ip("link", "set", bridge, "up")
    if ns in _ip("netns", "list").stdout.split():
        return
    _ip("netns", "add", ns)
    _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
    _ip("link", "set", inside, "netns", ns)
    _ip("link", "set", outside, "master", bridge, "up")
    _ip("-n", ns, "addr", "add", "%s/24" % host.address, "dev", inside)
    _ip("-n", ns, "link", "set", inside, "up")
    _ip("-n", ns, "link", "set", "lo", "up")


def down(spec: ClusterSpec, host: HostSpec) -> None:
    """Remove ``host``'s namespace (its veth goes with it); the bridge when unused."""
    if not host.netns or not available():
        return
    ns, bridge, outside, _ = names(spec, host)
    _ip("netns", "del", ns, check=False)
    _ip("link", "del", outside, check=False)
    if not any(h.netns and names(spec, h)[0] in _ip("netns", "list").stdout.split()
               for h in spec.hosts):
        _ip("link", "del", bridge, check=False)


def cut(spec: ClusterSpec, host: HostSpec) -> None:
    """Partition ``host``: its link to the bridge goes down."""
    _ip("link", "set", names(spec, host)[2], "down")


def heal(spec: ClusterSpec, host: HostSpec) -> None:
    _ip("link", "set", names(spec, host)[2], "up")
