"""`python -m executorch.exir export|inspect`: kept for the documented commands; the CLI is executorch.cli."""

from executorch.cli.main import run

run("python -m executorch.exir")
