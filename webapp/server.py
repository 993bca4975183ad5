"""``graphite-render``: serve the render app with Twisted's WSGI container.

    graphite-render --config /opt/graphite/conf/local_settings.py [--bind 127.0.0.1]
                    [--port 8080] [--threads 16] [--workers 1]

SIGHUP re-reads the settings file and applies CLUSTER_SERVERS and REMOTE_EXCLUDE_LOCAL
to the running app without closing the port. The app runs in the reactor's thread pool;
with ``--workers N`` N such processes share the port (webapp/prefork.py). Any WSGI
server (gunicorn, uwsgi) can serve ``webapp.wsgi:application`` instead.
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
from typing import Any, Optional, Sequence

from carbon.config.errors import ConfigError
from carbon.daemon.notify import notify
from webapp.process_tuning import freeze_startup_objects, keep_large_buffers
from webapp.app import make_app
from webapp.channel import bounded_channel
from webapp.settings import load_settings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='graphite-render',
                                     description='graphite-web compatible render API server')
    parser.add_argument('--config', '-c', help='settings file (graphite-web local_settings.py '
                        'syntax)')
    parser.add_argument('--bind', default='127.0.0.1', help='address to listen on '
                        '(default 127.0.0.1)')
    parser.add_argument('--port', type=int, default=8080, help='TCP port (default 8080, 0 = any)')
    parser.add_argument('--threads', type=int, default=16, help='WSGI worker threads '
                        '(default 16)')
    parser.add_argument('--workers', type=int, default=1, help='server processes sharing '
                        'the port, each with --threads threads (default 1; one per core '
                        'uses every core)')
    parser.add_argument('--debug', action='store_true', help='log debug messages to stderr')
    parser.add_argument('--check', action='store_true', help='validate the settings file '
                        '(and its FUNCTION_PLUGINS) and exit: 0 and one "ok" line, or 2 and '
                        'the error naming file, line and key; writes nothing')
    return parser


def check_settings(settings: Any, path: Optional[str]) -> int:
    """--check: what start-up would refuse, without starting (nothing is written)."""
    from webapp.functions.plugins import load_function_plugins
    from webapp.settings import ignored_warning
    try:
        if settings.get('FUNCTION_PLUGINS'):
            load_function_plugins(settings.FUNCTION_PLUGINS, path)
    except ConfigError as err:
        print('graphite-render: %s' % err, file=sys.stderr)
        return 2
    warning = ignored_warning(settings)
    if warning:
        print('WARNING: %s' % warning, file=sys.stderr)
    print('ok: graphite-render, %s%s' % (path or '(default settings)',
                                         ' (1 warning on stderr)' if warning else ''))
    return 0


def install_reload(reactor: Any, app: Any, path: Optional[str]) -> None:
    """On SIGHUP, re-read ``path`` and apply CLUSTER_SERVERS / REMOTE_EXCLUDE_LOCAL in the
    reactor thread (the signal handler only schedules it); requests keep being served.
    A ``--workers`` worker starts with SIGHUP blocked: one sent meanwhile arrives now."""
    def on_hup(signum: int, frame: Any) -> None:
        reactor.callFromThread(app.reload_settings, path)
    signal.signal(signal.SIGHUP, on_hup)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGHUP,))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the server until SIGINT/SIGTERM; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings(args.config)
    except ConfigError as err:
        print('graphite-render: %s' % err, file=sys.stderr)
        return 2
    if args.check:
        return check_settings(settings, args.config)
    # LOG_LEVEL names a logging level; an unknown name falls back
    level = logging.DEBUG if args.debug else getattr(logging, str(settings.LOG_LEVEL).upper(),
                                                     logging.INFO)
    logging.basicConfig(level=level, stream=sys.stderr,
                        format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    if args.workers > 1:
        from webapp.prefork import Supervisor, listening_socket
        try:
            sock = listening_socket(args.bind, args.port)
        except OSError as err:
            print('graphite-render: cannot listen on %s:%d: %s' % (args.bind, args.port, err),
                  file=sys.stderr)
            return 1
        host, port = sock.getsockname()[:2]
        def listening() -> None:
            print('graphite-render listening on http://%s:%d/ (%d workers)'
                  % (host, port, args.workers), flush=True)
            notify('READY=1')   # a Type=notify unit (carbon/deploy/systemd) is started

        return Supervisor(sock, args.workers,
                          lambda inherited: serve(args, settings, inherited)).run(listening)
    return serve(args, settings)


def serve(args: argparse.Namespace, settings: Any, sock: Optional[socket.socket] = None) -> int:
    """Build the app and run the reactor on a new port, or on ``sock`` (a worker of
    ``--workers``); returns the exit status."""
    keep_large_buffers()
    try:
        app = make_app(settings)
    except ConfigError as err:
        print('graphite-render: %s' % err, file=sys.stderr)
        return 2

    from twisted.internet import reactor
    from twisted.internet.error import CannotListenError
    from twisted.web.server import Site
    from webapp.paced import PacedWSGIResource

    freeze_startup_objects()
    pool = reactor.getThreadPool()
    pool.adjustPoolsize(minthreads=2, maxthreads=max(2, args.threads))
    # idle connections close after twice the arrival deadline; a request must arrive whole
    # within CLIENT_REQUEST_TIMEOUT (webapp.channel)
    seconds = float(settings.CLIENT_REQUEST_TIMEOUT)
    site = Site(PacedWSGIResource(reactor, pool, app), timeout=max(2 * seconds, 60.0))
    site.protocol = bounded_channel(seconds, int(settings.MAX_REQUEST_BYTES))
    site.displayTracebacks = False
    install_reload(reactor, app, args.config)   # before the port is announced
    if sock is not None:
        reactor.adoptStreamPort(sock.fileno(), sock.family, site)
        sock.close()        # the reactor holds its own copy of the descriptor
    else:
        try:
            port = reactor.listenTCP(args.port, site, interface=args.bind)
        except CannotListenError as err:
            print('graphite-render: cannot listen on %s:%d: %s' % (
                args.bind, args.port, err.socketError), file=sys.stderr)
            app.close()
            return 1
        address = port.getHost()
        print('graphite-render listening on http://%s:%d/' % (address.host, address.port),
              flush=True)
        notify('READY=1')
    reactor.addSystemEventTrigger('before', 'shutdown', app.close)
    reactor.run()
    return 0

if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
