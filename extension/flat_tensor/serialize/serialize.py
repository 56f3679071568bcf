"""The `.ptd` serializer at its published path; it lives in `executorch.exir._serialize._flat_tensor`."""

from executorch.exir._serialize._flat_tensor import *  # noqa: F401,F403
