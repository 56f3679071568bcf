"""The CLI's one error type: a message printed as one line and the exit code that goes with it."""


class CliError(Exception):
    """A user-facing failure: printed as one line, then the process exits with `code`."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def require_full_wheel(module: str, what: str) -> None:
    """Refuse `what` by name when `module` is not installed: the minimal wheel leaves it to the full wheel."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise CliError(f"{what} needs {module}, which ships with the full executorch wheel, not the minimal one; "
                       "install the full wheel (built without EXECUTORCH_BUILD_MINIMAL=1)", 1)
