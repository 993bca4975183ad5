"""Tests of carbon/config: carbon.conf and the rule files, defaults, warnings, the
shipped examples."""
