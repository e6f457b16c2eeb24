"""The experience bank: entries, their LanceDB store, synthesis, pruning and audit.

The bank knows nothing of torch: it stores text and numbers, and the training loop passes it plain
values (contributions per group, trajectories as records).
"""
