"""Caches shared by every run, study and driver on a machine (the embedding cache: :mod:`.embeddings`)."""
