"""Tests of webapp/functions: the render functions by group and their registry."""
