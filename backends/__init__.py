"""Delegate backends: one package per backend, its ahead-of-time half in Python, its runtime half in C++."""
