"""The command line of carbon-cache.py, carbon-relay.py, carbon-aggregator.py and
carbon-aggregator-cache.py: same options, messages and exit codes as carbon 1.1.10.
"""

from __future__ import annotations

import importlib
import os
import pwd
import signal
import sys
from optparse import OptionParser
from typing import Any

from carbon.config.errors import ConfigError
from carbon.config.loader import load_settings
from carbon.daemon.check import check_action, rule_paths
from carbon.daemon.notify import notify
from carbon.daemon.process import daemonize, handle_action, remove_pidfile, write_pidfile
from carbon.receivers.limits import raise_open_file_limit
from carbon.logs import log_for, log_twisted_errors

DAEMONS = {
    "carbon-cache": "carbon.daemon.cache:CacheDaemon",
    "carbon-relay": "carbon.daemon.relay:RelayDaemon",
    "carbon-aggregator": "carbon.daemon.aggregator:AggregatorDaemon",
    "carbon-aggregator-cache": "carbon.daemon.aggregator:AggregatorCacheDaemon",
}


def make_parser(program: str) -> OptionParser:
    parser = OptionParser(usage="%prog [options] <start|stop|status|check>")
    add = parser.add_option
    add("--debug", action="store_true", help="Run in the foreground, log to stdout")
    add("--syslog", action="store_true", help="Write logs to syslog")
    add("--nodaemon", action="store_true", help="Run in the foreground")
    add("--profile", help="Record performance profile data to the given file")
    add("--profiler", help="Specify the profiler to use")
    add("--pidfile", default=None, help="Write pid to the given file")
    add("--umask", default=None, help="Use the given umask when creating files")
    add("--config", default=None, help="Use the given config file")
    add("--whitelist", default=None, help="Use the given whitelist file")
    add("--blacklist", default=None, help="Use the given blacklist file")
    add("--logdir", default=None, help="Write logs in the given directory")
    add("--instance", default="a", help="Manage a specific carbon instance")
    add("--logfile", default=None, help="Log to a specified file, - for stdout")
    add("--logger", default=None, help="A fully-qualified name to a log observer factory")
    add("--log-to", default=None, choices=("files", "stdout"), type="choice",
        help="With --nodaemon: files writes carbon's log files in LOG_DIR (as the systemd "
             "units run), stdout writes '[type] message' lines (the default, as carbon)")
    if "carbon-aggregator" in program:
        add("--rules", default=None, help="Use the given aggregation rules file.")
        add("--rewrite-rules", default=None, help="Use the given rewrite rules file.")
    elif program == "carbon-relay":
        add("--rules", default=None, help="Use the given relay rules file.")
        add("--aggregation-rules", default=None, help="Use the given aggregation rules file.")
    return parser


def _daemon_class(program: str) -> Any:
    module_name, _, class_name = DAEMONS[program].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        print("%s is not built yet" % program)
        raise SystemExit(1) from None
    return getattr(module, class_name)


def _rule_paths(settings: Any, options: Any, program: str) -> None:
    rule_paths(settings, program, options.whitelist, options.blacklist,
               getattr(options, "rules", None), getattr(options, "rewrite_rules", None),
               getattr(options, "aggregation_rules", None))


def run(program: str, argv: list[str] | None = None, script: str | None = None) -> None:
    """Parse the command line, handle start/stop/status, and run the daemon."""
    argv = sys.argv[1:] if argv is None else argv
    parser = make_parser(program)
    options, args = parser.parse_args(argv)
    if not args:
        parser.print_usage()
        return
    action = args[0]
    script = script or sys.argv[0]
    root = os.environ.get("GRAPHITE_ROOT") or os.path.dirname(
        os.path.dirname(os.path.abspath(script)))
    try:
        settings = load_settings(program, options.instance, options.config, root,
                                 options.pidfile, options.logdir)
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    settings["debug"] = bool(options.debug)
    _rule_paths(settings, options, program)
    if action == "check":   # validate every config file; writes nothing
        sys.exit(check_action(program, settings))
    if action == "start":   # on the terminal too, not only in console.log
        for warning in settings.get("config_warnings", []):
            print("WARNING: %s" % warning, file=sys.stderr)
    schemas = os.path.join(settings.CONF_DIR, "storage-schemas.conf")
    if not os.path.exists(schemas):
        print("Error: missing required config %s" % schemas)
        sys.exit(1)
    handle_action(action, settings.pidfile, program, options.instance, settings.PID_DIR)
    foreground = bool(options.debug or options.nodaemon)
    daemon_class = _daemon_class(program)
    os.umask(int(options.umask, 8) if options.umask else 0o022)
    report = None if foreground else daemonize()
    try:
        _serve(program, settings, options, daemon_class, foreground, report)
    except SystemExit:
        raise
    except BaseException as exc:
        if report is not None:
            report(1, "%s failed to start: %s" % (program, exc))
        raise


def _serve(program: str, settings: Any, options: Any, daemon_class: Any, foreground: bool,
           report: Any) -> None:
    from twisted.internet import epollreactor

    epollreactor.install()
    from twisted.internet import reactor
    from twisted.internet.error import CannotListenError

    to_files = options.log_to == "files" if options.log_to else not foreground
    log = log_for(settings, to_files, debug=bool(options.debug))

    log_twisted_errors(log)
    raise_open_file_limit(log.msg)
    for warning in settings.get("config_warnings", []):
        log.msg("WARNING: %s" % warning)
    try:
        daemon = daemon_class(settings, log, reactor)
        # Before the ports open: a SIGHUP sent as soon as the daemon listens (or reports
        # that it started) must not meet the default action, which ends the process.
        install_sighup(program, daemon, reactor)
        daemon.start()
    except ConfigError as exc:
        if report is not None:
            report(1, str(exc))
        raise SystemExit(str(exc)) from None
    except (OSError, CannotListenError) as exc:
        message = "%s (instance %s) could not start: %s" % (program, options.instance, exc)
        if report is not None:
            report(1, message)
        raise SystemExit(message) from None
    write_pidfile(settings.pidfile)
    reactor.addSystemEventTrigger("after", "shutdown", remove_pidfile, settings.pidfile)
    if settings.USER and os.getuid() == 0:
        uid, gid = pwd.getpwnam(settings.USER)[2:4]
        os.setgid(gid)
        os.setuid(uid)
    log.msg("%s (instance %s) started" % (program, options.instance))
    if report is not None:
        report(0, "")
    notify("READY=1")   # a Type=notify unit is started now (carbon/deploy/systemd)
    reactor.addSystemEventTrigger("before", "shutdown", notify, "STOPPING=1")
    reactor.run()


def install_sighup(program: str, daemon: Any, reactor: Any) -> None:
    """SIGHUP runs ``daemon.reload`` (declared by every daemon, beside its stages) in the
    reactor thread, queued until the reactor runs."""
    signal.signal(signal.SIGHUP, lambda signum, frame: reactor.callFromThread(daemon.reload))


def cache_main() -> None:
    run("carbon-cache")


def relay_main() -> None:
    run("carbon-relay")


def aggregator_main() -> None:
    run("carbon-aggregator")


def aggregator_cache_main() -> None:
    run("carbon-aggregator-cache")
