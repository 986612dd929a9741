"""Collecting run records into the results database and summary tables."""
