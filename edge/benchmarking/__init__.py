"""Benchmarks whose tables the README reports: learning (``learning``) and its statistics (``stats``)."""
