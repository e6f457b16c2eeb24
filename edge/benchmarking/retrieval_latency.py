"""Bank retrieval latency at scale (synthetic banks of 1k-100k entries): LanceDB flat, LanceDB with an
IVF_FLAT index, and the in-memory search training uses; plus MiniLM's query embedding."""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np

from edge.benchmarking.timers import folder_bytes, percentiles_ms


def synthetic_bank_table(n: int, words: list[str], task_types: list[str], seed: int, embedder):
    """``n`` bank rows whose keys are three words of the environment's instructions, embedded by
    ``embedder``: queries share words with many keys, as real ones do. 90% active, 5% for any type."""
    import pyarrow as pa

    from edge.bank.store import ANY_TASK_TYPE, bank_schema

    rng = random.Random(seed)
    keys = [" ".join(rng.sample(words, 3)) for _ in range(n)]
    vectors = np.concatenate([embedder.embed(keys[i:i + 4096]) for i in range(0, n, 4096)])
    types = [ANY_TASK_TYPE if rng.random() < 0.05 else rng.choice(task_types) for _ in range(n)]
    status = ["active" if rng.random() < 0.9 else "pruned" for _ in range(n)]
    schema = bank_schema(embedder.dim, embedder.name)
    flat = pa.array(vectors.reshape(-1), type=pa.float32())
    columns = {
        "id": [f"g{i + 1:06d}" for i in range(n)], "text": [f"try the {k} first" for k in keys],
        "kind": ["try"] * n, "task_type": types, "signature": [f"{t}|{k}" for t, k in zip(types, keys)],
        "key": keys, "vector": pa.FixedSizeListArray.from_arrays(flat, embedder.dim),
        "utility": [0.0] * n, "uses": [0] * n, "positive_credit": [0.0] * n, "created_round": [0] * n,
        "last_used_round": [0] * n, "status": status, "prune_reason": [None] * n, "status_round": [None] * n,
        "provenance": [[] for _ in range(n)], "synthesizer": ["synthetic"] * n,
        "history_rounds": [[] for _ in range(n)], "history_utility": [[] for _ in range(n)],
        "history_success_plain": [[] for _ in range(n)], "history_success_conditioned": [[] for _ in range(n)],
        "revises": [None] * n,
    }
    return pa.Table.from_pydict(columns, schema=schema)


def tie_aware_recall(exact: list[float], approximate: list[float], eps: float = 1e-6) -> float:
    """Share of the exact top-k that the approximate search matched, by similarity rather than id:
    many synthetic keys tie, and which of several equally similar entries comes back is arbitrary."""
    if not exact:
        return 1.0
    kth = min(exact)
    return min(sum(s >= kth - eps for s in approximate), len(exact)) / len(exact)


def measure_retrieval(sizes: tuple[int, ...], queries: int, work: Path, params, seed: int) -> list[dict]:
    """Latency of ``ExperienceBank.retrieve`` as ``retrieve_experience`` calls it (4 x top_k candidates,
    active rows of the task's type, prefiltered): LanceDB flat, LanceDB with an IVF_FLAT cosine index,
    and the in-memory copy of the active vectors that training uses by default (``index_seconds``
    is then the time to build that copy, once per table version).

    The hash embedder embeds keys and queries, so the search is what is timed (MiniLM's query
    embedding is measured separately). The similarity threshold is applied in Python after the search,
    so passing -1 changes no latency and lets recall@k of the index be measured against flat search.
    IVF_FLAT because it is valid at every size here (PQ wants many rows per code, HNSW took minutes to
    build 100k rows on 2 cores) and keeps exact distances inside the partitions it probes."""
    import lancedb
    from lancedb.index import IvfFlat

    from edge.bank.embedder import HashEmbedder
    from edge.bank.store import ExperienceBank
    from edge.envs.registry import generate_tasks
    from edge.text import split_words

    env = params.train.env
    pool = generate_tasks(env, "train", 500, seed)
    words = sorted({w for t in pool for w in split_words(t.instruction)})
    task_types = sorted({t.task_type for t in pool})
    probe = generate_tasks(env, "test_seen", queries, seed)
    k = 4 * params.bank.top_k
    rows = []
    for n in sizes:
        folder = work / f"bank_{n}"
        embedder = HashEmbedder()
        started = time.perf_counter()
        table = synthetic_bank_table(n, words, task_types, seed, embedder)
        lancedb.connect(folder).create_table("bank", data=table)
        build = time.perf_counter() - started
        lance = ExperienceBank.open(folder, embedder, in_memory=False)
        memory = ExperienceBank.open(folder, embedder, in_memory=True)
        for index in ("none", "ivf_flat", "in_memory"):
            bank = memory if index == "in_memory" else lance
            started = time.perf_counter()
            if index == "ivf_flat":
                # Cosine, like the queries; LanceDB picks the number of partitions from the row count.
                lance._tbl.create_index("vector", config=IvfFlat(distance_type="cosine"))
            elif index == "in_memory":
                memory.retrieve(probe[0].instruction, k, -1.0, probe[0].task_type)  # builds the copy
            index_seconds = time.perf_counter() - started if index != "none" else 0.0
            for task in probe[:3]:  # open files and caches outside the clock
                bank.retrieve(task.instruction, k, -1.0, task.task_type)
            latencies, found = [], []
            for task in probe:
                embedder.embed([task.instruction])  # cached now: the timed call measures the search
                started = time.perf_counter()
                hits = bank.retrieve(task.instruction, k, -1.0, task.task_type)
                latencies.append(time.perf_counter() - started)
                found.append([score for _, score in hits])
            rows.append({"entries": n, "index": index, "build_seconds": build, "index_seconds": index_seconds,
                         "latency": percentiles_ms(latencies), "sims": found,
                         "disk_bytes": folder_bytes(folder)})
        flat = rows[-3]
        for other in rows[-2:]:
            recalls = [tie_aware_recall(a, b) for a, b in zip(flat["sims"], other["sims"]) if a]
            other["recall_at_k"] = float(np.mean(recalls)) if recalls else None
        flat["recall_at_k"] = 1.0
    for row in rows:
        del row["sims"]
    return rows


def measure_minilm(queries: int, params, seed: int) -> dict:
    """Query embedding by the real MiniLM embedder: first load, then one uncached text per call."""
    from edge.bank.embedder import MiniLMEmbedder
    from edge.envs.registry import generate_tasks

    texts = [t.instruction for t in generate_tasks(params.train.env, "test_unseen", queries + 1, seed)]
    embedder = MiniLMEmbedder()
    started = time.perf_counter()
    embedder.embed([texts[0]])  # the model loads once per process (or was loaded by the rounds)
    first = time.perf_counter() - started
    embedder.embed(["warm up", "go to fridge 1", "put a clean apple in the fridge"])  # first shapes are slow
    latencies = []
    for text in dict.fromkeys(texts[1:]):  # distinct texts, so the cache never answers
        started = time.perf_counter()
        embedder.embed([text])
        latencies.append(time.perf_counter() - started)
    return {"first_call_seconds": first, "latency": percentiles_ms(latencies)}
