"""Rendering results: the HTML report page and its sections, and the figures (matplotlib)."""
