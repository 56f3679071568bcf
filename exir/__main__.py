"""Entry point for `python -m executorch.exir` (see executorch.exir._cli)."""

import warnings

# torch warns at import when numpy is absent; exporting needs no numpy, so here it is only noise.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

from executorch.exir._cli import main  # noqa: E402

raise SystemExit(main())
