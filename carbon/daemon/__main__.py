"""``python -m carbon.daemon carbon-cache start`` runs a daemon without its script."""

import sys

from carbon.daemon.cli import DAEMONS, run

if len(sys.argv) < 2 or sys.argv[1] not in DAEMONS:
    print("usage: python -m carbon.daemon {%s} [options] start|stop|status" % ",".join(DAEMONS))
    raise SystemExit(1)
run(sys.argv[1], sys.argv[2:])
