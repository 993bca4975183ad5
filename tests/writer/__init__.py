"""Tests of carbon/writer: the writer threads, the creator, rate limits and the tag feed."""
