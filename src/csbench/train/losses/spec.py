"""What a training loss is (:class:`LossSpec`), the registry of losses, and how a loss is built.

A loss is one module of ``csbench.train.losses``: its ``nn.Module`` class and, at its top, its
declaration ``SPEC = loss_spec(name=..., description=..., factory="<class name>", defaults={...},
params={...})``. ``csbench/train/losses/__init__.py`` registers it with one line (its module name
in ``LOSS_MODULES``).

The registry imports no torch: ``csbench validate`` and every job check ``loss_params`` against the
losses' defaults and declarations before anything trains, and torch would add seconds to each. So
the registry reads each module's ``SPEC`` call from its source (:func:`read_spec`, as setuptools
reads a version without importing the package): its arguments are plain data (literals, or the
shared declarations of :data:`SHARED` by name); the module itself is imported, with torch, only when
the loss is built (:meth:`LossSpec.build`). tests/train/test_losses.py checks that the SPEC read and the
SPEC imported are equal.
"""

from __future__ import annotations

import ast
import copy
import difflib
import importlib
import importlib.util
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from csbench.params import check_params
from csbench.registry import Registry

if TYPE_CHECKING:
    from torch import nn

MARGIN = {"minimum": 0, "description": "margin α of the hinge"}
SYMMETRIC = {"description": "also rank queries for each code (both directions of the hinge)"}
HINGE_DEFAULTS = {"margin": 0.2, "symmetric": True}
HINGE_PARAMS = {"margin": MARGIN, "symmetric": SYMMETRIC}
# declarations several losses share: a SPEC may name these instead of repeating them
SHARED: dict[str, Any] = {
    "HINGE_DEFAULTS": HINGE_DEFAULTS,
    "HINGE_PARAMS": HINGE_PARAMS,
    "MARGIN": MARGIN,
    "SYMMETRIC": SYMMETRIC,
}


@dataclass(frozen=True)
class LossSpec:
    """A registered loss: ``factory`` is the name of its ``nn.Module`` class in ``module``, built from
    ``defaults`` overridden by a config's ``loss_params.<name>``."""

    name: str
    description: str
    factory: str
    defaults: dict[str, Any]
    # JSON-schema keywords per parameter beyond its default's type (csbench.params): ranges, values
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    module: str = ""  # the module that defines it (set when registered)

    def loss_class(self) -> type[nn.Module]:
        """The loss's ``nn.Module`` class (imports its module, and torch)."""
        return getattr(importlib.import_module(self.module), self.factory)

    def build(self, **params: Any) -> nn.Module:
        """The loss module with ``params`` (every parameter of ``defaults``)."""
        return self.loss_class()(**params)


def loss_spec(
    name: str,
    description: str,
    factory: str,
    defaults: dict[str, Any],
    params: dict[str, dict[str, Any]] | None = None,
) -> LossSpec:
    """A loss module's declaration (``SPEC = loss_spec(...)``, module docstring)."""
    return LossSpec(name, description, factory, copy.deepcopy(defaults), copy.deepcopy(params or {}))


LOSSES: Registry[LossSpec] = Registry("loss")


def register_module(module: str) -> LossSpec:
    """Register the loss that ``module`` declares (:func:`read_spec`, no import); returns its spec."""
    spec = read_spec(module)
    return LOSSES.add(spec)


def read_spec(module: str) -> LossSpec:
    """The ``SPEC = loss_spec(...)`` of ``module``, read from its source without running it."""
    found = importlib.util.find_spec(module)
    if found is None or found.origin is None:
        raise ImportError(f"loss module {module!r} not found")
    path = Path(found.origin)
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["SPEC"]
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "loss_spec"
        ):
            args = [_plain(arg, path) for arg in node.value.args]
            kwargs = {kw.arg: _plain(kw.value, path) for kw in node.value.keywords if kw.arg is not None}
            bound = inspect.signature(loss_spec).bind(*args, **kwargs)
            spec = loss_spec(*bound.args, **bound.kwargs)
            return LossSpec(spec.name, spec.description, spec.factory, spec.defaults, spec.params, module)
    raise ValueError(f"{path}: a loss module declares `SPEC = loss_spec(...)` at its top level")


def _plain(node: ast.expr, path: Path) -> Any:
    """The value of a SPEC argument: a literal, a name of :data:`SHARED`, or dicts / lists of them."""
    if isinstance(node, ast.Name) and node.id in SHARED:
        return copy.deepcopy(SHARED[node.id])
    if isinstance(node, ast.Dict) and all(key is not None for key in node.keys):
        keys = [_plain(key, path) for key in node.keys if key is not None]
        return dict(zip(keys, (_plain(value, path) for value in node.values), strict=True))
    if isinstance(node, ast.List):
        return [_plain(element, path) for element in node.elts]
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(
            f"{path}:{node.lineno}: the arguments of loss_spec(...) are read without importing the module: "
            f"literals or names of csbench.train.losses.spec.SHARED, not {ast.unparse(node)!r}"
        ) from None


def make_loss(name: str, params: dict[str, Any] | None = None) -> nn.Module:
    """The loss ``name`` built from its defaults overridden by ``params``.

    Raises :class:`~csbench.registry.UnknownNameError` for an unknown name (with a close match) and
    ValueError for a parameter the loss does not take, listing the valid ones, or a value of the
    wrong type or out of its range (``csbench.params``; `csbench validate` refuses them first).
    """
    spec = LOSSES.get(name)
    params = dict(params or {})
    unknown = sorted(set(params) - set(spec.defaults))
    if unknown:
        hints = []
        for param in unknown:
            close = difflib.get_close_matches(param, list(spec.defaults), n=1, cutoff=0.5)
            if close:
                hints.append(f"did you mean {close[0]!r} for {param!r}?")
        raise ValueError(
            f"unknown parameter(s) {', '.join(map(repr, unknown))} for loss {name!r}; "
            f"valid parameters: {', '.join(spec.defaults)}" + (f" ({' '.join(hints)})" if hints else "")
        )
    problem = check_params(params, spec.defaults, spec.params)
    if problem:
        raise ValueError(f"loss {name!r}: {problem.describe('loss_params.' + name)}")
    return spec.build(**{**spec.defaults, **params})
