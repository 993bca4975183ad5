"""graphite-web 1.1.10's /functions answer, recorded without its descriptions, so a test
can hold ours to the same JSON shape (names, signatures, groups, params) that Grafana reads.

``python -m tests.webapp.reference_functions`` re-records it by asking graphite-web 1.1.10
itself (Django's test client, in bench/common.py's venv) and writes
tests/data/graphite-web-functions.json. The descriptions are left out: ours are our own
text, and graphite-web's are not ours to copy.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
RECORDED = ROOT / 'tests' / 'data' / 'graphite-web-functions.json'
DROPPED = ('description', 'module')   # our text; graphite.render.functions vs webapp.*

ASK = """
import json
import django
django.setup()
from django.test import Client
client = Client()
out = {}
for kind, query in (('series', {}), ('pie', {'type': 'pie'})):
    answer = client.get('/functions/', query)
    out[kind] = json.loads(answer.content.decode().replace('1e9999', 'Infinity'))
print(json.dumps(out))
"""


def shape(entries: dict[str, dict]) -> dict[str, dict]:
    """An answer without the keys that are not expected to match, keeping which keys were
    there."""
    return {name: dict({k: v for k, v in info.items() if k not in DROPPED},
                       keys=sorted(info)) for name, info in entries.items()}


def record() -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / 'bench'))
    from common import graphite_web_venv
    from tests.interop.reference import graphite_web_settings
    venv = graphite_web_venv()
    with tempfile.TemporaryDirectory() as tmp:
        env = graphite_web_settings(Path(tmp))
        subprocess.run([str(venv / 'bin' / 'django-admin'), 'migrate', '-v', '0',
                        '--run-syncdb'], env=env, cwd=tmp, check=True)
        done = subprocess.run([str(venv / 'bin' / 'python'), '-c', ASK], env=env, cwd=tmp,
                              capture_output=True, text=True, timeout=300, check=False)
        if done.returncode:
            raise SystemExit(done.stderr[-3000:])
    answers = json.loads(done.stdout)
    return {kind: shape(entries) for kind, entries in answers.items()}


def load() -> dict[str, Any]:
    return json.loads(RECORDED.read_text())


if __name__ == '__main__':
    RECORDED.write_text(json.dumps(record(), indent=1, sort_keys=True) + '\n')
    print('wrote %s' % RECORDED)
