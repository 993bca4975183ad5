"""Tests of carbon/instrumentation: self-metric samples and stats."""
