"""Tests of webapp/graphs: PNG/SVG/PDF drawing, axes and graph options."""
