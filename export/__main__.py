"""Entry point for `python -m executorch.export` (the command lives with the others, in `executorch.cli.recipe`)."""

import sys

from executorch.cli.recipe import main

sys.exit(main())
