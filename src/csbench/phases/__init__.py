"""The pipeline's phases, one module each: ``download``, ``prepare``, ``audit``, ``attack``, ``train``,
``index``, ``evaluate``, ``perturb``, ``robust``, ``robustness``, ``aggregate``, ``dataset_table`` and
``challenge`` (``challenge-predict``). Each is a function of a :class:`Context` (the config and how
the command was given) and a key naming what to make (a dataset, a dataset and attack, a
:class:`~csbench.config.TrainKey`, a :class:`~csbench.config.RunKey`); it reads its inputs through
the stamps their producers wrote and writes its outputs and its own stamp. ``csbench.cli`` parses
the arguments and calls one phase; the Snakemake rules, the dvc stages and users call the CLI.

``paths.PHASE_CODE`` lists, per phase, the package files it runs (this package's ``__init__``, its
module, ``inputs`` where it reads another phase's outputs): their digest re-runs the phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from csbench.config import Config


@dataclass(frozen=True)
class Context:
    """What every phase is given beside its key: the config, the config files as the command named
    them (``None``: none named, params.yaml; the messages that say how to re-make an input repeat
    them), whether to show progress bars, and the worker processes of the phases that fan out."""

    config: Config
    config_files: tuple[str, ...] | None = None
    progress: bool = True
    jobs: int = 1

    def download_command(self, dataset: str) -> str:
        """The ``csbench download`` call that fetches ``dataset``, with the config files as given."""
        from shlex import quote

        configs = "".join(f" --config {quote(c)}" for c in self.config_files or [])
        return f"csbench download{configs} --dataset {dataset}"
