# local_settings.py of the carbon-fast container image (/etc/carbon/local_settings.py),
# read by `carbon-container render` (graphite-render --config /etc/carbon/local_settings.py).
# graphite-web's syntax and names; see docs/webapp.md.

STORAGE_DIR = "/var/lib/graphite"
WHISPER_DIR = "/var/lib/graphite/whisper"

# The caches of compose.yaml, by container name; the same names and instances as the
# relay's DESTINATIONS in carbon.conf, so both find a metric on the same cache.
CARBONLINK_HOSTS = ["cache-a:7002:a", "cache-b:7002:b"]
