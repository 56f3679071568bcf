"""Build helpers for setup.py: the component table, the plan derived from it, and the commands that package it."""
