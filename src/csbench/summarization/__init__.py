"""Code summarization (the thesis's second task, sections 1.6 and 3.1): generate the natural-language
description of a function, scored with BLEU.

A summarization run reads the same prepared and attacked splits as a search run (the reference summary
is the record's ``query``, the input its ``code``), under the same attacks, seeds and inference
(confused / not confused / zero-shot); its model is one of family ``seq2seq``
(:mod:`csbench.summarization.models`). What lives where:

- :mod:`csbench.summarization.models`: the architectures (one module each) and their contract;
- :mod:`csbench.summarization.decode`: greedy and beam search;
- :mod:`csbench.summarization.metrics`: BLEU-1..4, the composite, CodeXGLUE's smoothed BLEU-4;
- :mod:`csbench.summarization.data`: a memory-mapped pair store (training on Funcom's 2 M pairs);
- :mod:`csbench.train.summarizer`: the training task for the one engine;
- :mod:`csbench.phases.summarize`: the ``summarize`` phase (generate, score, write the run's records).
"""
