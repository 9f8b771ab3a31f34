"""Parsers that turn text from other tools (``nvidia-smi``, Slurm) into placer data."""
