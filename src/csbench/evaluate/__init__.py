"""Evaluation: retrieval protocols, metrics, per-query run files."""
