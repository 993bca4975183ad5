# The carbon-fast image: every daemon and the render app; the command picks which.
#   docker build -t carbon-fast .
#   docker run carbon-fast cache --instance a     (relay, aggregator, aggregator-cache, render)
# See docs/container.md. No "# syntax=" line: it would pull a frontend image from a registry.
# pip reads a CA bundle given as a BuildKit secret, where the network needs one:
#   DOCKER_BUILDKIT=1 docker build --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt .

# --- build: a venv with carbon-fast, its C accelerators (a failed build is an error) and
# the render app's extras
FROM debian:bookworm-slim AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-venv python3-dev gcc libc6-dev \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/carbon
WORKDIR /src
# the dependencies first, in a layer that only setup.py changes: setup.py alone installs
# them with an empty carbon-fast (no package folders yet, so nothing to compile)
COPY setup.py pyproject.toml ./
RUN --mount=type=secret,id=ca,target=/run/secrets/ca.crt \
    --mount=type=cache,target=/root/.cache/pip \
    if [ -s /run/secrets/ca.crt ]; then export PIP_CERT=/run/secrets/ca.crt; fi \
    && /opt/carbon/bin/pip install --upgrade pip setuptools wheel \
    && /opt/carbon/bin/pip install '.[render]'
COPY carbon carbon
COPY webapp webapp
RUN --mount=type=secret,id=ca,target=/run/secrets/ca.crt \
    --mount=type=cache,target=/root/.cache/pip \
    if [ -s /run/secrets/ca.crt ]; then export PIP_CERT=/run/secrets/ca.crt; fi \
    && CARBON_REQUIRE_NATIVE=1 /opt/carbon/bin/pip install --no-deps --force-reinstall . \
    && cd / && /opt/carbon/bin/python -c "import carbon.cache._store, webapp.render._rows"

# --- runtime: python3, the venv, a non-root user, the default configuration
FROM debian:bookworm-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 tini \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
# _graphite (uid/gid 999) owns storage, logs and pid files; a host folder mounted on
# /var/lib/graphite or /var/log/carbon must be writable by uid 999
RUN groupadd --system --gid 999 _graphite \
    && useradd --system --uid 999 --gid 999 --home-dir /var/lib/graphite --no-create-home \
        --shell /usr/sbin/nologin _graphite \
    && mkdir -p /etc/carbon /var/lib/graphite/whisper /var/log/carbon /run/carbon \
    && chown _graphite:_graphite /var/lib/graphite /var/lib/graphite/whisper \
        /var/log/carbon /run/carbon
COPY --from=build /opt/carbon /opt/carbon
COPY conf/storage-schemas.conf conf/storage-aggregation.conf conf/aggregation-rules.conf \
     conf/rewrite-rules.conf conf/whitelist.conf conf/blacklist.conf /etc/carbon/
COPY container/conf/ /etc/carbon/
COPY container/entrypoint.py /usr/local/bin/carbon-container
ENV PATH=/opt/carbon/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    GRAPHITE_CONF_DIR=/etc/carbon \
    GRAPHITE_STORAGE_DIR=/var/lib/graphite \
    PYTHONUNBUFFERED=1
USER _graphite
WORKDIR /var/lib/graphite
VOLUME ["/etc/carbon", "/var/lib/graphite", "/var/log/carbon"]
# cache: line 2003, pickle 2004, carbonlink 7002; relay: 2013, 2014; aggregator: 2023, 2024;
# aggregator-cache: 2033, 2034, carbonlink 7032; render app: 8080
EXPOSE 2003 2004 7002 2013 2014 2023 2024 2033 2034 7032 8080
# asks the daemon this container runs: carbonlink (caches), the line receiver (relay,
# aggregator), GET /version (render app)
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["/usr/local/bin/carbon-container", "healthcheck"]
# tini is PID 1: it reaps children and passes docker stop's SIGTERM to the daemon, which
# the entrypoint has replaced itself with
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/carbon-container"]
CMD ["cache"]
