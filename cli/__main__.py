"""Entry point for `python -m executorch.cli` (the same commands as `python -m executorch.exir`)."""

from executorch.cli.main import run

run("python -m executorch.cli")
