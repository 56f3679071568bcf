"""Entry point for `python -m executorch.export` (see `executorch.cli.recipe`)."""

import sys

from executorch.cli.recipe import main

sys.exit(main())
