"""Prefect flows: wiring only; the logic lives in ``edge``."""
