"""Tests of the whisper storage backend and tagged series names."""
