"""Render-time data structures."""
