"""docs/upgrading.md names every carbon.conf key of ours that carbon 1.1.10 does not have
(an operator rolling back needs to know each one), read from carbon 1.1.10's own
defaults in its venv."""

from __future__ import annotations

from tests.interop.reference import carbon_venv, run_reference
from tests.support import ROOT
from carbon.config.defaults import DEFAULTS

REFERENCE_KEYS = """
import json
from carbon.conf import defaults
print(json.dumps(sorted(defaults)))
"""


def test_upgrading_doc_lists_every_key_carbon_does_not_have() -> None:
    reference = set(run_reference(carbon_venv(), REFERENCE_KEYS, None))
    assert {"MAX_UPDATES_PER_SECOND", "DESTINATIONS"} <= reference
    doc = (ROOT / "docs" / "upgrading.md").read_text()
    ours = doc[doc.index("### Keys of ours"):doc.index("## The test")]
    differing = doc[doc.index("## carbon.conf keys that behave differently"):
                    doc.index("### Keys of ours")]
    missing = [key for key in sorted(set(DEFAULTS) - reference)
               if "`%s`" % key not in ours and "`%s`" % key not in differing]
    assert missing == []
