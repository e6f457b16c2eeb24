"""Benchmarks behind `edge bench ...`: each module measures one figure of the evidence and writes its tables.

``perf``: the performance profile (throughput, forward-pass share, stage times, orchestration overhead,
bank retrieval latency) and the cost of the bank per round.
"""
