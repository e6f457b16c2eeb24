"""Benchmarks behind `edge bench ...`: each module measures one figure of the evidence and writes its tables.

``learning``: every method over paired seeds, final success with bootstrap intervals, differences
against GRPO with permutation p-values (statistics in ``stats``), curves against environment steps.
``perf``: the performance profile (throughput, forward-pass share, stage times, orchestration overhead,
bank retrieval latency) and the cost of the bank per round.
"""
