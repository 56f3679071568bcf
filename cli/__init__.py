"""The command line over exir and runtime: export a model to a `.pte` and verify it, or summarize a `.pte`."""
