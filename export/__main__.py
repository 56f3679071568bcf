"""Entry point for `python -m executorch.export` (see `executorch.export._cli`)."""

import sys

from executorch.export._cli import main

sys.exit(main())
