"""carbon-cache hands whole plaintext reads to its sink (one C pass from the read to
the journal and the cache) only when nothing stands between the receivers and the
cache; with a white/blacklist or carbon-aggregator-cache's aggregation every read
goes through those stages as before. Decided once, when the daemon is composed."""

from __future__ import annotations

from pathlib import Path

import pytest
from twisted.internet import reactor

from carbon.cache import journal as journal_module
from carbon.config.loader import load_settings
from carbon.daemon.aggregator import AggregatorCacheDaemon
from carbon.daemon.base import WHOLE_READ_BYTES
from carbon.daemon.cache import CacheDaemon
from carbon.logs import MemoryLog


def compose(root: Path, program: str, extra: str = "") -> CacheDaemon:
    conf = root / "conf"
    conf.mkdir(parents=True)
    storage = root / "storage"
    (conf / "carbon.conf").write_text(
        "[cache]\nSTORAGE_DIR = %s\nLOCAL_DATA_DIR = %s/whisper\nCACHE_JOURNAL = False\n"
        "%s\n" % (storage, storage, extra))
    (conf / "storage-schemas.conf").write_text("[default]\npattern = .*\nretentions = 60:10\n")
    (conf / "aggregation-rules.conf").write_text("sum.<a> (60) = sum <a>.*\n")
    (conf / "whitelist.conf").write_text(".*\n")
    settings = load_settings(program, "a", str(conf / "carbon.conf"), str(root), environ={})
    daemon_class = AggregatorCacheDaemon if program == "carbon-aggregator-cache" \
        else CacheDaemon
    return daemon_class(settings, MemoryLog(), reactor)


@pytest.mark.skipif(journal_module._native_encode_lines is None,
                    reason="C accelerator not built")
def test_only_plain_carbon_cache_takes_whole_reads_into_its_sink(tmp_path) -> None:
    taken: list[bytes] = []

    def spied(daemon: CacheDaemon) -> CacheDaemon:
        assert daemon.sink.accepts_chunks  # the sink could; the composition decides
        put_chunk = daemon.sink.put_chunk

        def spy(chunk: bytes, max_length: int = 0) -> int | None:
            taken.append(chunk)
            return put_chunk(chunk, max_length)
        daemon.sink.put_chunk = spy  # type: ignore[method-assign]
        return daemon

    plain = spied(compose(tmp_path / "plain", "carbon-cache"))
    assert plain.pipeline.processors == () and plain.pipeline.accepts_chunks
    assert plain.receivers.read_size == WHOLE_READ_BYTES  # one C pass per 256 KiB
    assert plain.pipeline.process_chunk(b"a.b 1 100\n") == 1 and taken == [b"a.b 1 100\n"]
    assert plain.cache.get("a.b") == [(100.0, 1.0)]
    listed = spied(compose(tmp_path / "listed", "carbon-cache", "USE_WHITELIST = True"))
    assert listed.pipeline.processors and not listed.pipeline.accepts_chunks
    assert listed.receivers.read_size == 0  # Twisted's reads, as before
    assert listed.pipeline.process_chunk(b"a.b 1 100\n") is None
    aggregating = spied(compose(tmp_path / "aggregating", "carbon-aggregator-cache"))
    assert aggregating.pipeline.processors
    aggregating.pipeline.process_chunk(b"sum.x.y 1 100\n")  # its aggregation stage's
    assert taken == [b"a.b 1 100\n"]
