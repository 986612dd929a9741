"""Name → object registries with helpful errors for misspelt names."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


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
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = item
        return item

    def get(self, name: str, where: str | None = None) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, list(self._items), where) from None

    def check(self, name: str, where: str | None = None) -> None:
        self.get(name, where)

    def names(self) -> list[str]:
        return list(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)
