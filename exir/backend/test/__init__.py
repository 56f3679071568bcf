"""Backends and partitioners that ship for testing delegation end to end."""
