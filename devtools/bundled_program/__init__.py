"""Bundled programs (`.bpte`): a `.pte` together with test cases for its methods."""
