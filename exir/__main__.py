"""Entry point for `python -m executorch.exir` (see executorch.exir._cli)."""

from executorch.exir._cli import main

raise SystemExit(main())
