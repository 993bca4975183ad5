"""Tests of carbon/aggregator: rules, methods, buffers, staging, the rewrite rules."""
