"""Checks of the project as a whole: import layering, the type check, the changelog,
the docs of self-metrics, tools and bench scripts."""
