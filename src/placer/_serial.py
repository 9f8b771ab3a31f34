"""One lock per placement state: the public methods of a class that keeps one hold it.

:class:`placer.Cluster` and :class:`placer.kernel.KernelSession` are serialised this way,
on the one :class:`threading.RLock` they share (``docs/extender.md``, "Thread safety").
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

__all__ = ["serialised"]

C = TypeVar("C", bound=type)


def _holding_lock(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (a method) run while its object's ``lock`` is held."""

    @functools.wraps(function)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return function(self, *args, **kwargs)

    return locked


def serialised(cls: C) -> C:
    """Make every public method and property that ``cls`` defines hold ``self.lock`` (a
    :class:`threading.RLock` the instance sets in ``__init__``) while it runs.

    The unlocked function stays as ``__wrapped__``. A public generator method is refused:
    it would run outside the lock, a step at a time.
    """
    for name, value in list(vars(cls).items()):
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            setter = value.fset and _holding_lock(value.fset)
            setattr(cls, name, property(value.fget and _holding_lock(value.fget), setter, value.fdel, value.__doc__))
        elif inspect.isfunction(value):
            if inspect.isgeneratorfunction(value):
                raise TypeError(f"{cls.__name__}.{name} is a generator: it would run outside the lock")
            setattr(cls, name, _holding_lock(value))
    return cls
