"""Name → object registries with helpful errors for misspelt names.

Components register where they are defined: a module builds its spec object (a frozen dataclass
with a ``name``) and hands it to its kind's registry, ``ATTACKS.add(Attack("ordered_id", ...))``
beside the code, or through a decorator that the kind's module provides around ``add``. The
package's ``__init__`` imports each component module once: that import line is the registration.
The registries are also the single list of names: the config schema's enums are filled from them
(``csbench.config.schema``), never written by hand.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from types import ModuleType
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class Named(Protocol):
    """A spec object that carries its own registered name."""

    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


class UnknownNameError(KeyError):
    """A name that is not registered; the message lists the valid names and a close match."""

    def __init__(self, kind: str, name: str, valid: list[str], where: str | None = None) -> None:
        self.kind, self.name, self.valid, self.where = kind, name, sorted(valid), where
        super().__init__(self.message)

    @property
    def message(self) -> str:
        where = f" (at {self.where})" if self.where else ""
        msg = f"unknown {self.kind} {self.name!r}{where}; valid names: {', '.join(self.valid)}"
        close = difflib.get_close_matches(str(self.name), self.valid, n=1, cutoff=0.5)
        if close:
            msg += f". Did you mean {close[0]!r}?"
        return msg

    def __str__(self) -> str:
        return self.message


class Registry(Generic[T]):
    """An ordered mapping from names to registered objects of one kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        """Register ``item`` under ``name``; a name registered twice is an error (two modules
        claiming one name would otherwise silently shadow each other)."""
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = item
        return item

    def add(self: Registry[N], item: N) -> N:
        """Register a spec object under its own ``name``; returns it, so a module can write
        ``SPEC = REGISTRY.add(Spec("name", ...))`` beside the code the spec describes."""
        return self.register(item.name, item)

    def get(self, name: str, where: str | None = None) -> T:
        """The object registered as ``name``; :class:`UnknownNameError` (valid names, closest
        match) otherwise. ``where``: the config key that named it, for the message."""
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, list(self._items), where) from None

    def check(self, name: str, where: str | None = None) -> None:
        """Raise :class:`UnknownNameError` unless ``name`` is registered."""
        self.get(name, where)

    def names(self) -> list[str]:
        """The registered names, in registration order (the order of the package's imports)."""
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)


def defined_in(module: ModuleType, kind: type[T]) -> list[T]:
    """The ``kind`` objects ``module`` defines at its top level, alone or in tuples, in definition
    order: the specs a component module declares (``datasets/releases/cosqa.py``: ``COSQA``,
    ``COSQA_RETRIEVAL``, ...), registered by naming the module once."""
    found: list[T] = []
    for value in vars(module).values():
        if isinstance(value, kind):
            found.append(value)
        elif isinstance(value, tuple) and value and all(isinstance(item, kind) for item in value):
            found.extend(value)
    return found
