"""Default values of every carbon.conf key, as carbon 1.1.10's code defines them.

The type of each default decides how a value from carbon.conf is parsed
(see carbon.config.settings). Keys with a default of ``None`` are parsed as
numbers when they look like numbers, otherwise kept as strings.
"""

INF = float("inf")

DEFAULTS = dict(
    USER="",
    MAX_CACHE_SIZE=INF,
    MAX_UPDATES_PER_SECOND=500,
    MAX_UPDATES_PER_SECOND_ON_SHUTDOWN=None,
    MAX_CREATES_PER_MINUTE=INF,
    MIN_TIMESTAMP_RESOLUTION=0,
    MIN_TIMESTAMP_LAG=0,
    LINE_RECEIVER_INTERFACE="0.0.0.0",
    LINE_RECEIVER_PORT=2003,
    LINE_RECEIVER_BACKLOG=1024,
    ENABLE_UDP_LISTENER=False,
    UDP_RECEIVER_INTERFACE="0.0.0.0",
    UDP_RECEIVER_PORT=2003,
    PICKLE_RECEIVER_INTERFACE="0.0.0.0",
    PICKLE_RECEIVER_PORT=2004,
    PICKLE_RECEIVER_BACKLOG=1024,
    MAX_RECEIVER_CONNECTIONS=INF,
    CACHE_QUERY_INTERFACE="0.0.0.0",
    CACHE_QUERY_PORT=7002,
    CACHE_QUERY_BACKLOG=1024,
    LOG_UPDATES=True,
    LOG_CREATES=True,
    LOG_CACHE_HITS=True,
    LOG_CACHE_QUEUE_SORTS=True,
    DATABASE="whisper",
    WHISPER_AUTOFLUSH=False,
    WHISPER_SPARSE_CREATE=False,
    WHISPER_FALLOCATE_CREATE=False,
    WHISPER_LOCK_WRITES=False,
    WHISPER_FADVISE_RANDOM=False,
    CERES_MAX_SLICE_GAP=80,
    CERES_NODE_CACHING_BEHAVIOR="all",
    CERES_SLICE_CACHING_BEHAVIOR="latest",
    CERES_LOCK_WRITES=False,
    MAX_DATAPOINTS_PER_MESSAGE=500,
    MAX_AGGREGATION_INTERVALS=5,
    FORWARD_ALL=True,
    MAX_QUEUE_SIZE=1000,
    QUEUE_LOW_WATERMARK_PCT=0.8,
    TIME_TO_DEFER_SENDING=0.0001,
    ENABLE_AMQP=False,
    AMQP_HOST="localhost",
    AMQP_PORT=5672,
    AMQP_VHOST="/",
    AMQP_USER="guest",
    AMQP_PASSWORD="guest",
    AMQP_EXCHANGE="graphite",
    AMQP_QUEUE="",
    AMQP_METRIC_NAME_IN_BODY=False,
    AMQP_VERBOSE=False,
    AMQP_SPEC=None,
    BIND_PATTERNS=["#"],
    GRAPHITE_URL="http://127.0.0.1:80",
    ENABLE_TAGS=True,
    SKIP_TAGS_FOR_NONTAGGED=True,
    TAG_UPDATE_INTERVAL=100,
    TAG_BATCH_SIZE=100,
    TAG_QUEUE_SIZE=10000,
    TAG_HASH_FILENAMES=True,
    TAG_RELAY_NORMALIZED=False,
    # Ours: series whose tagging failed (render app down) are retried from a set of at
    # most this many, after a back-off from 1 s doubling up to TAG_RETRY_INTERVAL
    # seconds (carbon only tags them again on their next create or 100th update).
    TAG_RETRY_QUEUE_SIZE=100000,
    TAG_RETRY_INTERVAL=10,
    ENABLE_MANHOLE=False,
    MANHOLE_INTERFACE="127.0.0.1",
    MANHOLE_PORT=7222,
    MANHOLE_USER="",
    MANHOLE_PUBLIC_KEY="",
    MANHOLE_HOST_KEY_DIR="",
    RELAY_METHOD="rules",
    DYNAMIC_ROUTER=False,
    DYNAMIC_ROUTER_MAX_RETRIES=5,
    ROUTER_HASH_TYPE=None,
    REPLICATION_FACTOR=1,
    DIVERSE_REPLICAS=True,
    DESTINATIONS=[],
    DESTINATION_PROTOCOL="pickle",
    DESTINATION_TRANSPORT="none",
    DESTINATION_SSL_CA=None,
    DESTINATION_POOL_REPLICAS=False,
    USE_FLOW_CONTROL=True,
    USE_INSECURE_UNPICKLER=False,
    USE_WHITELIST=False,
    CARBON_METRIC_PREFIX="carbon",
    CARBON_METRIC_INTERVAL=60,
    CACHE_WRITE_STRATEGY="sorted",
    WRITE_BACK_FREQUENCY=None,
    MIN_RESET_STAT_FLOW=1000,
    MIN_RESET_RATIO=0.9,
    MIN_RESET_INTERVAL=121,
    TCP_KEEPALIVE=True,
    TCP_KEEPIDLE=10,
    TCP_KEEPINTVL=30,
    TCP_KEEPCNT=2,
    USE_RATIO_RESET=False,
    LOG_LISTENER_CONN_LOST=False,
    LOG_LISTENER_CONN_SUCCESS=True,
    LOG_AGGREGATOR_MISSES=True,
    AGGREGATION_RULES="aggregation-rules.conf",
    REWRITE_RULES="rewrite-rules.conf",
    RELAY_RULES="relay-rules.conf",
    ENABLE_LOGROTATION=True,
    METRIC_CLIENT_IDLE_TIMEOUT=None,
    CACHE_METRIC_NAMES_MAX=0,
    CACHE_METRIC_NAMES_TTL=0,
    RAVEN_DSN=None,
    PICKLE_RECEIVER_MAX_LENGTH=2 ** 20,
    # Keys of this implementation (documented in conf/carbon.conf).
    LINE_RECEIVER_MAX_LENGTH=16384,
    SHUTDOWN_FLUSH_TIMEOUT=30,
    SPOOL_MAX_BYTES=1024 ** 3,
    # At-least-once relaying: per destination, the last bytes written are kept and sent
    # again (or spooled) when its connection ends other than by our own clean close.
    # Bounded by size and by age; either at 0 turns it off. 4 MiB covers a loopback
    # peer's receive buffer plus our send buffer in the common case.
    DESTINATION_RESEND_WINDOW_BYTES=4 * 1024 * 1024,
    DESTINATION_RESEND_WINDOW_SECONDS=10.0,
    # At shutdown each receiver connection is half-closed and read until its sender
    # closes (or is quiet for half a second); connections still open after this many
    # seconds are cut.
    RECEIVER_SHUTDOWN_DRAIN_SECONDS=5.0,
    # Descriptors receivers leave free for carbonlink, new whisper files, logs and
    # self-metrics (an eighth of a small open-file limit at most). Past the limit this
    # leaves, or MAX_RECEIVER_CONNECTIONS, new receiver connections are closed at once
    # and counted; one listener.log line per BAD_LINE_LOG_INTERVAL gives the counts.
    RECEIVER_FD_RESERVE=64,
    RELAY_HASH_CACHE_SIZE=1000000,
    AGGREGATION_RULE_CACHE_SIZE=100000,
    BAD_LINE_LOG_INTERVAL=60,
    WHISPER_FD_CACHE_SIZE=1024,
    WHISPER_FD_CACHE_IDLE=300,
    RATE_LIMITER="token_bucket",
    WRITER_THREADS=1,
    # Threads making new metrics' files at once, on the path that writes a new file's
    # points in its create (no create or update limit): creates in different
    # directories run in parallel in ext4 (a fresh ext4 here: 100k files in 2.9 s with
    # one thread, 1.5 s with two).
    CREATE_THREADS=2,
    # Metrics whose file the writer knows to exist (and their file paths): writes to them
    # need no stat. Bounds the memory an idle known metric costs (~0.7 KB each); past it
    # both are forgotten at once and a file is looked for again (one stat) when next
    # written.
    WRITER_KNOWN_FILES=100000,
    # Seconds between the starts of the writer's passes over the cache (0: no wait, a
    # new pass as soon as one ends, as carbon 1.1.10). While points pour in, a wait makes
    # each whisper update carry more points (docs/performance.md, "Ingest against
    # VictoriaMetrics"); points wait up to that much longer in the cache (answered by
    # carbonlink) and the journal.
    WRITER_MIN_PASS_SECONDS=1.0,
    RELAY_WORKERS=1,
    # RELAY_METHOD = cluster-rebalance (carbon-cluster rebalance writes it): the JSON file
    # of the old and new rings (carbon/cluster/router.py).
    REBALANCE_STATE="",
    # The cache journal (write-ahead log, carbon/cache/journal.py): every batch the cache
    # accepts is appended to a segment file first, so a killed daemon loses nothing; the
    # next start replays it before listening.
    CACHE_JOURNAL=True,
    # Where the segments go; empty: STORAGE_DIR/cache-journal/<program>-<instance>.
    CACHE_JOURNAL_DIR="",
    # Seconds between fdatasync calls: what a power loss (not a process kill) can take.
    # 0 never syncs.
    CACHE_JOURNAL_FSYNC_INTERVAL=1.0,
    # Journal bytes (segments not yet fully in whisper) at which the receivers are paused,
    # as MAX_CACHE_SIZE does; they resume below 90%.
    CACHE_JOURNAL_MAX_BYTES=4 * 1024 ** 3,
    # A segment is closed (and can be retired) at this size.
    CACHE_JOURNAL_SEGMENT_BYTES=64 * 1024 ** 2,
    # SIGTERM writes the whole cache to whisper at MAX_UPDATES_PER_SECOND_ON_SHUTDOWN
    # before exiting (as carbon). With CACHE_JOURNAL on, False exits as soon as the
    # journal is flushed: nothing is lost, the next start replays it.
    SHUTDOWN_DRAIN_CACHE=True,
    # Rotated daily log files kept per log file (console.log.2026_11_27 ...): at each
    # rotation the oldest beyond this count are removed. 0 keeps them all (carbon 1.1.10
    # never removes one).
    LOG_ROTATION_COUNT=0,
)

# Keys whose values are paths; derived from STORAGE_DIR when not set.
PATH_KEYS = ("STORAGE_DIR", "LOCAL_DATA_DIR", "WHITELISTS_DIR", "PID_DIR", "LOG_DIR", "CONF_DIR")
