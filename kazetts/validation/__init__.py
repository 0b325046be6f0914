"""Checking kazetts against the PyTorch reference: golden dumps, the validator, the reference loader."""
