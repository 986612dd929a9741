"""Reference twin of GenCodeSearchNet's (GeCS) matching ("clf") evaluation, transcribed.

Sources: drndr/gencodesearchnet at commit 466792bcd233bd28c28758df03e2c25325b581ae (the last change of
both evaluation scripts; the same files at 70db22a16e1111d7f66e2c0fa67b44e74a0a0e89, the newest commit
read):

* ``experiments/eval_clf_cosine.py``, the zero-shot evaluation of an embedding model
  (``Salesforce/codet5p-110m-embedding``): :func:`load_data` is its ``load_data`` line for line (split
  ``input`` at ``[CODESPLIT]``, skip a line that does not split in exactly two, skip a line whose text or
  code contains the tokenizer's sep / cls / pad / eos token, labels from ``target``);
  :class:`CodeSearchDataset` is its dataset class verbatim; :func:`predict` is its ``predict``: batches
  of ``--batch_size`` (default 2) from a ``DataLoader`` in file order, ``torch.cosine_similarity`` of the
  comment and code embeddings, ``torch.where(sim > 0.5, 1, 0)``, then scikit-learn's ``accuracy_score``,
  ``precision_score``, ``recall_score`` and ``f1_score`` with their defaults (binary, ``pos_label=1``: the
  match class is positive; no rounding). Left out: the tokenizer call and the model, replaced by
  ``embed_comments(texts)`` / ``embed_codes(texts) -> tensor`` (GeCS's one model encodes both sides; the
  vectors come from the caller, so the twin decides exactly the vectors csbench decides), the device,
  tqdm and logging.
* ``experiments/eval_clf.py``, the fine-tuned cross-encoders: :func:`predict_head` is its ``predict``
  (``outputs.logits.argmax(-1)``: match only where the match logit is strictly larger, a tie is class 0)
  with the same four metrics; the model's forward pass is replaced by the logits. Its loader
  (``experiments/utils.py`` ``load_data``) skips the same lines as above, truncates the comment to 50
  tokens and shuffles the batches (``shuffle=True``), which changes no metric (labels move with
  their predictions).

The released ``clf`` test files are made by ``data/clf/*/create_ds_*.py`` (e.g.
``data/clf/codesearchnet_go/create_ds_clf_go.py`` at 3d17ccae32e1798bf7d0da670b123fb0cacfa700): for each
item in order, its true pair, then one false pair with the code of ``random.choice`` of the other items.
:func:`create_cbt_lines` is that loop (``create_cbt_jsonl_file``), line for line, writing ``[CODESPLIT]`` as
the released files do (the repository's scripts for CodeSearchNet write ``[SEP]``; the Zenodo files,
which the paper describes, hold ``[CODESPLIT]``) and ``random.seed(42)`` first, as their ``main`` does.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from types import SimpleNamespace

import torch
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score
from torch.utils.data import DataLoader

Embed = Callable[[list[str]], torch.Tensor]  # texts -> their embeddings (the model's forward pass)


def load_data(tokenizer, file):
    # create dataset
    comments = []
    codes = []
    labels = []
    skipped = 0

    is_sep_token_set = tokenizer.sep_token is not None
    is_cls_token_set = tokenizer.cls_token is not None
    is_pad_token_set = tokenizer.pad_token is not None
    is_eos_token_set = tokenizer.eos_token is not None

    with open(file, encoding="utf-8") as infile:
        for line in infile:
            try:
                item = json.loads(line.strip())
                input = item["input"]
                # split at [CODESPLIT] token
                input = input.split("[CODESPLIT]")
                if len(input) != 2:
                    # skip cases with more than one [SEP] token
                    logging.warning(f"Input contains more than one [CODESPLIT] token: {input}")
                    skipped += 1
                    continue
                # skip every sample that contains special tokens
                if is_sep_token_set and (tokenizer.sep_token in input[0] or tokenizer.sep_token in input[1]):
                    logging.warning(f"Input contains special tokens: {input}")
                    skipped += 1
                    continue
                if is_cls_token_set and (tokenizer.cls_token in input[0] or tokenizer.cls_token in input[1]):
                    logging.warning(f"Input contains special tokens: {input}")
                    skipped += 1
                    continue
                if is_pad_token_set and (tokenizer.pad_token in input[0] or tokenizer.pad_token in input[1]):
                    logging.warning(f"Input contains special tokens: {input}")
                    skipped += 1
                    continue
                if is_eos_token_set and (tokenizer.eos_token in input[0] or tokenizer.eos_token in input[1]):
                    logging.warning(f"Input contains special tokens: {input}")
                    skipped += 1
                    continue
                comments.append(input[0])
                codes.append(input[1])
                labels.append(item["target"])
            except json.JSONDecodeError as e:
                print(f"Error: JSON decoding failed - {e}")
                continue
    logging.info(f"Skipped {skipped} samples due to special tokens")

    return comments, codes, labels


def special_tokens(sep=None, cls=None, pad=None, eos=None):
    """A stand-in for the tokenizer ``load_data`` reads four attributes of."""
    return SimpleNamespace(sep_token=sep, cls_token=cls, pad_token=pad, eos_token=eos)


def predict(embed_comments: Embed, embed_codes: Embed, dataloader) -> dict:
    """Predict on test set."""
    predictions = []
    labels = []
    for batch in dataloader:
        comments = batch[0]
        codes = batch[1]
        labels += batch[2].tolist()
        with torch.no_grad():
            # get embeddings
            comments_emb = embed_comments(list(comments))
            codes_emb = embed_codes(list(codes))
            # calc pairwise cosine similarity
            sim = torch.cosine_similarity(comments_emb, codes_emb)
            # get predictions 1 if sim > 0.5 else 0
            pred = torch.where(sim > 0.5, torch.tensor(1), torch.tensor(0))
            predictions.extend(pred.tolist())

    return _metrics(labels, predictions) | {"predictions": predictions}


def predict_head(logits_batches: list[torch.Tensor], label_batches: list[torch.Tensor]) -> dict:
    """``eval_clf.py``'s ``predict``: the class of the larger logit (a tie: class 0)."""
    predictions = []
    labels = []
    for logits, batch_labels in zip(logits_batches, label_batches, strict=True):
        with torch.no_grad():
            predictions.extend(logits.argmax(-1).cpu().numpy().tolist())
            labels.extend(batch_labels.cpu().numpy().tolist())
    return _metrics(labels, predictions) | {"predictions": predictions}


def _metrics(labels, predictions) -> dict:
    metrics = {}
    # calc metrics

    # calc accuracy
    accuracy = accuracy_score(labels, predictions)
    metrics["accuracy"] = accuracy

    # calc precision
    precision = precision_score(labels, predictions)
    metrics["precision"] = precision

    # calc recall
    recall = recall_score(labels, predictions)
    metrics["recall"] = recall

    # calc f1
    f1 = f1_score(labels, predictions)
    metrics["f1"] = f1

    return metrics


class CodeSearchDataset(torch.utils.data.Dataset):
    def __init__(self, comments, codes, labels):
        assert len(comments) == len(codes)
        assert len(comments) == len(labels)
        self.comments = comments
        self.codes = codes
        self.labels = labels

    def __len__(self):
        return len(self.comments)

    def __getitem__(self, idx):
        return self.comments[idx], self.codes[idx], self.labels[idx]


def evaluate_file(file, embed_comments: Embed, embed_codes: Embed, tokenizer, batch_size: int = 2) -> dict:
    """``main``'s loop body for one test file: load, batch (``--batch_size`` default 2), predict."""
    comments, code, labels = load_data(tokenizer, file)
    dataset = CodeSearchDataset(comments, code, labels)
    dataloader = DataLoader(dataset, batch_size=batch_size)
    return predict(embed_comments, embed_codes, dataloader) | {"comments": comments, "codes": code, "labels": labels}


def create_cbt_lines(data: list[dict], seed: int | None = 42) -> list[dict]:
    """``create_cbt_jsonl_file`` of ``create_ds_clf_*.py``: a true pair and a false pair per item
    (items with ``docstring`` and ``code``), ``[CODESPLIT]`` between text and code."""
    if seed is not None:
        random.seed(seed)
    data_with_fields = []
    # Create a list of indices to sample from
    sample_indices = list(range(len(data)))

    for idx, item in enumerate(data):
        # Create True Pair
        input = item["docstring"] + " [CODESPLIT] " + item["code"]
        target = 1
        target_options = ["no_match", "match"]

        data_with_fields.append({"input": input, "target": target, "target_options": target_options})

        # Create False Pair
        sample_indices.remove(idx)  # To avoid sampling from the same line
        sampled_idx = random.choice(sample_indices)  # Randomly sample code from another line
        input = item["docstring"] + " [CODESPLIT] " + data[sampled_idx]["code"]
        sample_indices.append(idx)  # Add back the removed index for future sampling

        target = 0
        target_options = ["no_match", "match"]

        data_with_fields.append({"input": input, "target": target, "target_options": target_options})
    return data_with_fields
