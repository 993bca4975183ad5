#!/usr/bin/env python3
"""Print where a carbon relay would send each metric name read on stdin.

    echo foo.bar | tools/relay_check.py --config /opt/graphite/conf/carbon.conf
    tools/relay_check.py --destinations 10.0.0.1:2004:a,10.0.0.2:2004:b \\
        --method consistent-hashing --replication 2 < names.txt

See ``carbon.relay.routing_dry_run`` (``--help`` for every option).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from carbon.relay.routing_dry_run import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
