"""`deprecated` and `experimental`: decorators that warn when a class, function or method is used.

`deprecated(message, *, category=DeprecationWarning, stacklevel=1)` behaves as PEP 702's
(`warnings.deprecated` in Python 3.13): the decorated object gets `__deprecated__ = message`, and
calling the function or instantiating (or subclassing) the class warns with `message`, unless
`category` is None. `experimental` is the same with `ExperimentalWarning`, a DeprecationWarning so
that the default filters hide it as they hide deprecations. Standard library only: the minimal wheel
has no typing_extensions to lean on.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Optional, TypeVar

__all__ = ["ExperimentalWarning", "deprecated", "experimental"]

_T = TypeVar("_T")


class ExperimentalWarning(DeprecationWarning):
    """Warned when an experimental API is used."""


class deprecated:
    """Mark a class, function or overload as deprecated: it warns with `message` when used."""

    def __init__(self, message: str, /, *, category: Optional[type[Warning]] = DeprecationWarning,
                 stacklevel: int = 1) -> None:
        if not isinstance(message, str):
            raise TypeError(f"{type(self).__name__}() takes the message as a str, not {type(message).__name__}; "
                            f"write @{type(self).__name__}('why, and what to use instead')")
        self.message = message
        self.category = category
        self.stacklevel = stacklevel

    def __call__(self, arg: _T, /) -> _T:
        message, category, stacklevel = self.message, self.category, self.stacklevel
        if category is None:
            arg.__deprecated__ = message
            return arg
        if isinstance(arg, type):
            _warn_on_instantiation(arg, message, category, stacklevel)
            arg.__deprecated__ = message
            return arg
        if not callable(arg):
            raise TypeError(f"@{type(self).__name__} decorates classes and callables, not {arg!r}")

        @functools.wraps(arg)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            warnings.warn(message, category=category, stacklevel=stacklevel + 1)
            return arg(*args, **kwargs)

        wrapper.__deprecated__ = arg.__deprecated__ = message
        return wrapper  # type: ignore[return-value]


def _warn_on_instantiation(cls: type, message: str, category: type[Warning], stacklevel: int) -> None:
    # The warning belongs to the decorated class only: a subclass warns when it is defined, not when
    # it is instantiated, unless it is decorated itself.
    original_new: Callable[..., Any] = cls.__new__

    @functools.wraps(original_new)
    def __new__(klass: type, /, *args: Any, **kwargs: Any) -> Any:
        if klass is cls:
            warnings.warn(message, category=category, stacklevel=stacklevel + 1)
        if original_new is not object.__new__:
            return original_new(klass, *args, **kwargs)
        if klass.__init__ is object.__init__ and (args or kwargs):
            raise TypeError(f"{klass.__name__}() takes no arguments")
        return original_new(klass)

    cls.__new__ = staticmethod(__new__)  # type: ignore[assignment]

    own = cls.__dict__.get("__init_subclass__")

    def __init_subclass__(klass: type, *args: Any, **kwargs: Any) -> None:
        warnings.warn(message, category=category, stacklevel=stacklevel + 1)
        if isinstance(own, classmethod):
            own.__func__(klass, *args, **kwargs)
        else:
            super(cls, klass).__init_subclass__(*args, **kwargs)

    cls.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment]


class experimental(deprecated):
    """Mark a class, function or overload as experimental: it warns with `message` (an
    ExperimentalWarning) when used."""

    def __init__(self, message: str, /, *, category: Optional[type[Warning]] = ExperimentalWarning,
                 stacklevel: int = 1) -> None:
        super().__init__(message, category=category, stacklevel=stacklevel)
