"""Graph passes of the export pipeline; each is a plain function over a graph module."""
