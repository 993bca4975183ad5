"""A fast, drop-in reimplementation of Graphite's Carbon daemons."""

__version__ = "1.1.10"
