"""Tags with conf/ as shipped: series sent while the render app is down are tagged once it
comes up (GRAPHITE_URL matches the shipped render app; failed series are retried)."""

from __future__ import annotations

import json
import re
import time
import urllib.parse

from carbon.config.loader import load_settings
from tests.daemon.shipped import (
    BIN, Foreground, get_json, port_free, RELAY_AND_CACHES, require_free_ports, SHIPPED_PORTS,
    shipped_root, start_relay_and_caches,
)
from tests.support import CONF, send_tcp, wait_for

RENDER_PORT = 8080   # where the README starts the render app, and conf/ sends tags
SERIES = ["shop.requests;dc=%s;host=web%03d" % ("east" if i % 2 else "west", i)
          for i in range(150)]   # more than one TAG_BATCH_SIZE (100); tags in sorted order


def test_shipped_graphite_url_is_the_shipped_render_app(tmp_path):
    for instance in ("a", "b"):
        settings = load_settings("carbon-cache", instance, str(CONF / "carbon.conf"),
                                 str(tmp_path), environ={})
        assert settings.GRAPHITE_URL == "http://127.0.0.1:%d" % RENDER_PORT
    for program, config in (("carbon-aggregator-cache", "carbon.conf"),
                            ("carbon-cache", "carbon.amqp.conf")):
        settings = load_settings(program, "a", str(CONF / config), str(tmp_path), environ={})
        assert settings.GRAPHITE_URL == "http://127.0.0.1:%d" % RENDER_PORT
    readme = (CONF.parent / "README.md").read_text()
    assert "graphite-render --config conf/local_settings.py --port %d" % RENDER_PORT in readme


def test_series_tagged_while_the_render_app_was_down_are_tagged_when_it_comes_up(tmp_path):
    require_free_ports(RELAY_AND_CACHES)
    assert port_free(RENDER_PORT), "this test needs port %d of 127.0.0.1 free" % RENDER_PORT
    root = shipped_root(tmp_path)
    stack = Foreground(root)
    try:
        start_relay_and_caches(stack)
        now = int(time.time())
        send_tcp(SHIPPED_PORTS["relay line"],
                 "".join("%s %d %d\n" % (name, i, now - 30) for i, name in
                         enumerate(SERIES)).encode())

        outputs = [root / ("carbon-cache.py-%d.out" % SHIPPED_PORTS["cache %s carbonlink" % i])
                   for i in ("a", "b")]

        def text() -> str:
            return "".join(path.read_text() for path in outputs)
        # every series is in whisper, and tagging failed: nothing listens on 8080 yet
        wait_for(lambda: len(re.findall(r"creating database metric shop\.requests;",
                                        text())) == len(SERIES), 60,
                 what="every series to be created")
        wait_for(lambda: "errors tagging series" in text(), 30, what="tagging to fail")
        assert "Connection refused" in text(), text()[-2000:]

        stack.start([str(BIN / "graphite-render"), "--config", "conf/local_settings.py",
                     "--port", str(RENDER_PORT)], RENDER_PORT)
        up = time.monotonic()
        base = "http://127.0.0.1:%d" % RENDER_PORT

        def all_tagged() -> list:
            found = get_json(base + "/tags/findSeries?" + urllib.parse.urlencode(
                {"expr": "name=shop.requests"}))
            return found if len(found) == len(SERIES) else []
        found = wait_for(all_tagged, 30, what="every series to be tagged")
        took = time.monotonic() - up
        print("all %d series tagged %.1f s after the render app listened" % (len(SERIES), took))
        # TAG_RETRY_INTERVAL (10 s, the longest back-off) plus this machine's slack
        assert took < 10 + 5, "tagged %.1f s after the render app came up" % took
        assert sorted(found) == sorted(SERIES)

        assert get_json(base + "/tags/autoComplete/tags") == ["dc", "host", "name"]
        assert get_json(base + "/tags/autoComplete/values?tag=dc") == ["east", "west"]
        query = urllib.parse.urlencode({"target": "seriesByTag('dc=east')", "from": now - 300,
                                        "until": now + 60, "format": "json"})
        rendered = get_json(base + "/render?" + query)
        assert sorted(s["target"] for s in rendered) == sorted(
            n for n in SERIES if ";dc=east;" in n)
        values = {s["target"]: [v for v, _t in s["datapoints"] if v is not None]
                  for s in rendered}
        assert values[SERIES[1]] == [1.0], json.dumps(rendered)[:500]
    finally:
        stack.stop()
