# local_settings.py: settings of the render app, in graphite-web's syntax (plain
# Python assignments of UPPERCASE names; an existing graphite-web
# local_settings.py works as it is). Start it with
#   graphite-render --config conf/local_settings.py --port 8080
# As shipped it reads the whisper files and the two cache instances of
# conf/carbon.conf. A commented line shows the default.
import os

# The folder holding conf/ and storage/, as for the carbon daemons: $GRAPHITE_ROOT,
# else the folder above this file's.
GRAPHITE_ROOT = os.environ.get("GRAPHITE_ROOT") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
# STORAGE_DIR = $GRAPHITE_STORAGE_DIR or GRAPHITE_ROOT/storage
# WHISPER_DIR = STORAGE_DIR/whisper

# The carbon-cache instances to ask for points not yet written (carbonlink:
# CACHE_QUERY_PORT of each), host:port:instance. A metric is asked of the one
# instance the relay's consistent hashing gives it to, so list the same
# instances as the relay's DESTINATIONS, with the same hash type.
CARBONLINK_HOSTS = ["127.0.0.1:7002:a", "127.0.0.1:7102:b"]
# CARBONLINK_HASHING_TYPE = "carbon_ch"
# CARBONLINK_TIMEOUT = 1.0
# CARBONLINK_RETRY_DELAY = 15
# REPLICATION_FACTOR = 1

# Other graphite-web servers to federate finds and renders with (host:port).
# CLUSTER_SERVERS = []
# FIND_TIMEOUT = 3.0
# FETCH_TIMEOUT = 6.0

# TIME_ZONE = "UTC"
# DEFAULT_XFILES_FACTOR = 0
# DEFAULT_CACHE_DURATION = 60

# Tags: a sqlite database (graphite-web's LocalDatabaseTagDB schema).
# TAGDB_SQLITE_PATH = STORAGE_DIR/graphite.db

# Render functions of your own: modules exporting SeriesFunctions / PieFunctions.
# FUNCTION_PLUGINS = []

# 400 instead of 200 for invalid function arguments.
# ENFORCE_INPUT_VALIDATION = False
# LOG_LEVEL = "INFO"
