"""Tests of carbon/logs.py: log files and their rotation."""
