"""Training: COBE losses, the training loop, schedules and early stopping."""
