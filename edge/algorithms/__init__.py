"""Learning rules: GRPO (the baseline), marginal contribution and distillation (EDGE)."""
