"""conf/ as shipped: relay -> caches a and b -> render app, with no file changed."""

from __future__ import annotations

import time
import urllib.parse

from tests.daemon.shipped import (
    BIN, Foreground, get_json, RELAY_AND_CACHES, require_free_ports, SHIPPED_PORTS,
    shipped_root, start_relay_and_caches,
)
from tests.support import free_port, send_tcp, wait_for

NAMES = ["servers.web%02d.cpu" % i for i in range(8)] + ["servers.db%02d.cpu" % i
                                                          for i in range(8)]


def test_point_sent_to_shipped_relay_is_rendered(tmp_path):
    require_free_ports(RELAY_AND_CACHES)
    root = shipped_root(tmp_path)
    stack = Foreground(root)
    try:
        start_relay_and_caches(stack)
        http = free_port()
        stack.start([str(BIN / "graphite-render"), "--config", "conf/local_settings.py",
                     "--port", str(http)], http)

        now = int(time.time()) // 60 * 60
        lines = "".join("%s %d %d\n" % (name, i + 1, now - 60) for i, name in enumerate(NAMES))
        send_tcp(SHIPPED_PORTS["relay line"], lines.encode())

        # Consistent hashing gives each name to exactly one instance, and uses both.
        def created() -> dict:
            owners: dict = {}
            for instance in ("a", "b"):
                out = (root / ("carbon-cache.py-%d.out"
                               % SHIPPED_PORTS["cache %s carbonlink" % instance])).read_text()
                for name in NAMES:
                    if "creating database metric %s " % name in out:
                        owners.setdefault(name, []).append(instance)
            return owners if len(owners) == len(NAMES) else {}
        owners = wait_for(created, 60, what="every name to be created by a cache")
        assert all(len(instances) == 1 for instances in owners.values()), owners
        assert {i for (i,) in owners.values()} == {"a", "b"}, owners

        query = urllib.parse.urlencode({"target": "servers.*.cpu", "from": now - 300,
                                        "until": now + 60, "format": "json"})
        url = "http://127.0.0.1:%d/render?%s" % (http, query)

        def rendered() -> dict:
            series = get_json(url)
            values = {s["target"]: [v for v, _t in s["datapoints"] if v is not None]
                      for s in series}
            return values if all(values.get(n) for n in NAMES) else {}
        values = wait_for(rendered, 60, what="/render to show every name")
        assert {n: values[n] for n in NAMES} == {n: [float(i + 1)] for i, n in enumerate(NAMES)}

    finally:
        stack.stop()
