"""Developer tools that ship in every wheel: output comparison (and, later, bundled programs)."""
