"""Tests of carbon/formats: plaintext line and pickle parsing, framing, the C
accelerators against their Python twins."""
