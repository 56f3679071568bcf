"""The CLI's one error type: a message printed as one line and the exit code that goes with it."""


class CliError(Exception):
    """A user-facing failure: printed as one line, then the process exits with `code`."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code
