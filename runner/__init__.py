"""Overlap's exercise engine: grades async training code on a virtual clock (see README.md)."""
