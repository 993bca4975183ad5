"""Tests of carbon/cache: the metric cache, its write strategies and the journal."""
