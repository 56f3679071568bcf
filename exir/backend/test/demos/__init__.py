"""Demonstration backends."""
