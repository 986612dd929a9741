"""Components register where they are defined, and the config schema's names come from the registries.

Adding an attack or a loss is one new module and one registry line: here a toy attack and a toy loss are
registered from modules of their own (no other file touched) and are at once valid in a config, parsed,
run and built; the schema file itself lists no registered name.
"""

from __future__ import annotations

import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from csbench.attacks import ATTACKS, Attack, parse_spec, renaming_attack, run_attack
from csbench.config import ConfigError, validate_config
from csbench.config.schema import REGISTERED, SCHEMA_PATH, schema
from csbench.registry import Registry, UnknownNameError, defined_in
from csbench.train.losses import LOSS_MODULES, LOSSES
from csbench.train.losses.spec import read_spec

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"


class _Spec:
    def __init__(self, name: str) -> None:
        self.name = name


def test_add_registers_under_the_spec_name_and_refuses_a_second() -> None:
    registry: Registry[_Spec] = Registry("widget")
    first = registry.add(_Spec("alpha"))
    assert registry.get("alpha") is first and registry.names() == ["alpha"] and len(registry) == 1
    with pytest.raises(ValueError, match="widget 'alpha' is registered twice"):
        registry.add(_Spec("alpha"))
    with pytest.raises(UnknownNameError, match="Did you mean 'alpha'"):
        registry.get("alpah")


def test_defined_in_finds_specs_and_tuples_of_specs_in_definition_order() -> None:
    module = types.ModuleType("toy_specs")
    module.B = _Spec("b")
    module.PAIR = (_Spec("c"), _Spec("d"))
    module.OTHER = ("not", "specs")
    module.A = _Spec("a")
    assert [spec.name for spec in defined_in(module, _Spec)] == ["b", "c", "d", "a"]


# ------------------------------------------------------------------------------------ the schema


def _at(node: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    for key in keys:
        node = node[key]
    return node


def test_the_schema_file_lists_no_registered_name() -> None:
    raw = yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))
    for keys, key, _ in REGISTERED:
        assert not _at(raw, keys).get(key), (keys, key)  # filled from the registry, never by hand


def test_the_schema_names_are_the_registries() -> None:
    from csbench.code.parsing import LANGUAGES
    from csbench.evaluate.protocols import PROTOCOLS
    from csbench.models import FAMILIES

    full = schema()
    props = full["properties"]
    trained = props["grid"]["properties"]["trained"]["properties"]
    assert trained["losses"]["items"]["enum"] == LOSSES.names()
    assert trained["inference"]["items"]["enum"] == ["confused", "not_confused"]
    assert list(props["loss_params"]["properties"]) == LOSSES.names()
    assert props["evaluation"]["properties"]["protocols"]["items"]["enum"] == PROTOCOLS.names()
    assert props["models"]["additionalProperties"]["properties"]["family"]["enum"] == list(FAMILIES)
    assert full["$defs"]["local_source"]["properties"]["language"]["enum"] == list(LANGUAGES)
    sections = props["attack_params"]["properties"]
    assert list(sections) == ATTACKS.names()
    for name, section in sections.items():
        assert section.get("properties", {}) == ATTACKS.get(name).params_schema
        assert section["additionalProperties"] is False


# ------------------------------------------------------------------------------------ attacks


@pytest.fixture
def scratch_attacks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made in a test are forgotten after it."""
    monkeypatch.setattr(ATTACKS, "_items", dict(ATTACKS._items))


def test_a_new_attack_is_one_module(scratch_attacks: None) -> None:
    module = types.ModuleType("csbench_toy_attack")
    exec(  # what attacks/<name>.py holds; its import line in attacks/__init__.py runs it
        textwrap.dedent(
            '''
            from csbench.attacks.spec import renaming_attack

            @renaming_attack(
                "upper_id",
                "the j-th identifier -> ID<j> (a toy)",
                defaults={"start": 1},
                params_schema={"start": {"type": "integer", "minimum": 0}},
            )
            def upper_id(items, params):
                return [
                    {name: f"ID{j}" for j, name in enumerate(it.identifiers.names, params["start"])}
                    for it in items
                ]
            '''
        ),
        module.__dict__,
    )
    assert ATTACKS.get("upper_id").kind == "renaming"
    (component,) = parse_spec("upper_id", {"upper_id": {"start": 5}})
    assert component.params == {"start": 5}
    frame = pd.DataFrame({"language": ["python"], "code": ["def f(a):\n    # add one\n    return a + 1\n"]})
    out, report = run_attack("upper_id+no_comment", {"test": frame}, progress=False)
    assert out["test"]["code"][0] == "def ID1(ID2):\n    return ID2 + 1\n"
    assert report.renamed == {"python": 1}
    raw = yaml.safe_load(PARAMS.read_text(encoding="utf-8"))
    raw["grid"]["attacks"] = [*raw["grid"]["attacks"], "upper_id"]
    raw["attack_params"] = {"upper_id": {"start": 0}}
    validate_config(raw)  # valid at once: the schema's attack_params come from the registry
    raw["attack_params"] = {"upper_id": {"start": -1}}
    with pytest.raises(ConfigError, match=r"attack_params.upper_id.start: -1 is less than the minimum of 0"):
        validate_config(raw)


def test_an_attack_declares_exactly_its_parameters(scratch_attacks: None) -> None:
    with pytest.raises(ValueError, match="params_schema must describe exactly its defaults"):
        Attack("broken", "defaults without a schema", ("*",), "none", defaults={"k": 1})
    with pytest.raises(ValueError, match="registered twice"):
        renaming_attack("ordered_id", "again")(lambda items, params: [])


# ------------------------------------------------------------------------------------ losses


@pytest.mark.parametrize("module", LOSS_MODULES)
def test_the_declaration_read_without_torch_is_the_module_s(module: str) -> None:
    import importlib

    imported = importlib.import_module(f"csbench.train.losses.{module}").SPEC
    read = read_spec(f"csbench.train.losses.{module}")
    assert (read.name, read.description, read.factory, read.defaults, read.params) == (
        imported.name,
        imported.description,
        imported.factory,
        imported.defaults,
        imported.params,
    )
    assert read.defaults == read.loss_class().DEFAULTS


TOY_LOSS = '''
"""A toy loss: the mean of the off-diagonal scores."""

from torch import Tensor, nn

from csbench.train.losses.spec import MARGIN, loss_spec

SPEC = loss_spec(
    name="off_diagonal",
    description="mean of the negatives' scores, minus the margin (a toy)",
    factory="OffDiagonalLoss",
    defaults={"margin": 0.5},
    params={"margin": MARGIN},
)


class OffDiagonalLoss(nn.Module):
    def __init__(self, margin: float = 0.5) -> None:
        super().__init__()
        self.margin = margin

    def forward(self, scores: Tensor, *, epoch: int = 0, step: int = 0) -> Tensor:
        mask = ~__import__("torch").eye(scores.shape[0], dtype=bool)
        return scores[mask].mean() - self.margin
'''


def test_a_new_loss_is_one_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from csbench.train.losses import make_loss
    from csbench.train.losses.spec import register_module

    package = tmp_path / "toy_losses"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "off_diagonal.py").write_text(TOY_LOSS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(LOSSES, "_items", dict(LOSSES._items))
    register_module("toy_losses.off_diagonal")  # what the line in LOSS_MODULES does
    assert "toy_losses.off_diagonal" not in sys.modules  # registered from its source: nothing imported
    loss = make_loss("off_diagonal", {"margin": 0.25})
    assert loss(torch.tensor([[1.0, 2.0], [4.0, 1.0]])).item() == pytest.approx(2.75)
    with pytest.raises(ValueError, match=r"loss_params.off_diagonal.margin: -1 is less than the minimum of 0"):
        make_loss("off_diagonal", {"margin": -1})
    raw = yaml.safe_load(PARAMS.read_text(encoding="utf-8"))
    raw["loss_params"] = {"off_diagonal": {"margin": 0.1}}
    validate_config(raw)  # loss_params.<loss>: filled from the registry


def test_a_loss_declaration_must_be_plain_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "bad_losses"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "computed.py").write_text(
        "from csbench.train.losses.spec import loss_spec\nMARGINS = {'margin': 0.1}\n"
        "SPEC = loss_spec('computed', 'x', 'X', dict(MARGINS))\n"
    )
    (package / "undeclared.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"computed.py:3: the arguments of loss_spec\(...\) are read without"):
        read_spec("bad_losses.computed")
    with pytest.raises(ValueError, match=r"declares `SPEC = loss_spec\(...\)`"):
        read_spec("bad_losses.undeclared")


# ------------------------------------------------------------------------------------ perturbations, build


def test_perturbations_register_beside_their_code() -> None:
    from csbench.perturbations import NLPAUG_PARAMS, PERTURBATIONS
    from csbench.perturbations.augmenters import AUGMENTERS

    assert PERTURBATIONS.names() == ["case", "replace", "noise", "typo", "synonym", "swap", "question"]
    assert list(NLPAUG_PARAMS) == list(AUGMENTERS) == ["replace", "noise", "typo", "synonym", "swap"]
    assert PERTURBATIONS.get("synonym").guard is AUGMENTERS["synonym"].guard
    assert PERTURBATIONS.get("case").guard().__enter__() is None  # no guard: a null context


def test_the_attack_engine_is_compiled_at_install() -> None:
    from csbench import _native

    assert _native.HOT_MODULES["csbench.attacks.engine"] == "attacks/engine.py"
