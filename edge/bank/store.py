"""The experience bank's store: one LanceDB table of ``BankEntry`` rows.

Nothing is ever deleted. Crediting, pruning and merging rewrite a row (``upsert``) and change its
``status``; retrieval only sees ``active`` rows, while ``all()`` and the audit see every row.

Every LanceDB write makes a new table version. The training loop records ``version()`` at the
start of a round; a re-run of a round that crashed half-way first calls ``restore`` with that
version, so the round's writes are not applied twice. ``restore`` does not rewind history: it
writes a *new* version whose rows equal the old one, so the crashed writes stay inspectable
through ``checkout`` until ``optimize`` is called.

Vectors come from the bank's embedder. The embedder's name and dimension are stored in the table's
schema metadata, and opening a table with a different embedder is refused: similarities between
vectors of two embedders mean nothing.

Similarity search is answered from memory by default: a LanceDB query costs ~8 ms of fixed
overhead whatever the table size (the synchronous API hands every query to a background event
loop), and a flat scan of 100k rows ~200 ms. ``ActiveVectors`` holds the active rows and their unit
vectors, per task type, and is rebuilt when the table's version changes (any write, by this handle
or another). ``in_memory=False`` queries LanceDB instead (then a vector index helps large banks).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import warnings
from datetime import timedelta
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from edge.bank.embedder import HashEmbedder, MiniLMEmbedder
from edge.bank.entry import BankEntry
from edge.envs.base import EVERY_SUBJECT
from edge.files import IntegrityError, write_with

EMBED_DIM = 384
_ID = re.compile(r"^g(\d+)$")
_ID_WIDTH = 6


def bank_schema(dim: int = EMBED_DIM, embedder: str | None = None) -> pa.Schema:
    """One column per ``BankEntry`` field; only ``prune_reason``, ``status_round`` and ``revises`` may be null."""
    fields = [
        pa.field("id", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("task_type", pa.string(), nullable=False),
        pa.field("signature", pa.string(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
        pa.field("utility", pa.float64(), nullable=False),
        pa.field("uses", pa.int64(), nullable=False),
        pa.field("positive_credit", pa.float64(), nullable=False),
        pa.field("created_round", pa.int64(), nullable=False),
        pa.field("last_used_round", pa.int64(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("prune_reason", pa.string(), nullable=True),
        pa.field("status_round", pa.int64(), nullable=True),
        pa.field("provenance", pa.list_(pa.string()), nullable=False),
        pa.field("synthesizer", pa.string(), nullable=False),
        pa.field("history_rounds", pa.list_(pa.int64()), nullable=False),
        pa.field("history_utility", pa.list_(pa.float64()), nullable=False),
        pa.field("history_success_plain", pa.list_(pa.float64()), nullable=False),
        pa.field("history_success_conditioned", pa.list_(pa.float64()), nullable=False),
        pa.field("revises", pa.string(), nullable=True),
    ]
    metadata = {"edge.embedder": embedder or "", "edge.dim": str(dim)}
    return pa.schema(fields, metadata=metadata)


BANK_SCHEMA = bank_schema()
_FIELDS = [f.name for f in dataclasses.fields(BankEntry)]
# A new BankEntry field must get a column here too; fail at import, not on the first write.
assert _FIELDS == BANK_SCHEMA.names, "bank_schema() is out of step with BankEntry"


ANY_TASK_TYPE = "any"
"""Task type of guidance that holds for every task (e.g. "open closed receptacles")."""


def sql_string(value: str) -> str:
    """A SQL string literal: single quotes doubled, so a value can never end the literal early."""
    return "'" + str(value).replace("'", "''") + "'"


def _to_row(entry: BankEntry) -> dict:
    return dataclasses.asdict(entry)


def _to_entries(table: pa.Table) -> list[BankEntry]:
    """Rows to entries, sorted by id (extra columns such as ``_distance`` are ignored)."""
    names = [name for name in _FIELDS if name in table.column_names]  # a bank from before `revises` lacks it
    entries = [BankEntry(**{name: row[name] for name in names}) for row in table.select(names).to_pylist()]
    return sorted(entries, key=lambda e: e.id)


@dataclasses.dataclass
class ActiveVectors:
    """The active rows of one table version, with unit-length vectors grouped by task type."""

    version: int
    rows: pa.Table
    unit: np.ndarray
    """(rows, dim) float32; a zero vector stays zero (similar to nothing)."""
    task_types: np.ndarray
    id_rank: np.ndarray
    """Each row's position in id order: ties in similarity go to the smaller id, every run."""
    _by_type: dict = dataclasses.field(default_factory=dict)
    _every_subject: list[BankEntry] | None = None

    @classmethod
    def of(cls, table, version: int) -> ActiveVectors:
        rows = table.to_arrow()
        # One chunk: ``take`` on a chunked table would concatenate the chunks on every query.
        rows = rows.filter(pc.equal(rows.column("status"), "active")).combine_chunks()
        dim = rows.schema.field("vector").type.list_size
        vectors = rows.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        vectors = vectors.reshape(-1, dim).astype(np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        id_rank = np.empty(rows.num_rows, dtype=np.int64)
        id_rank[np.argsort(np.asarray(rows.column("id").to_pylist(), dtype=object), kind="stable")] = np.arange(
            rows.num_rows)
        return cls(version, rows, unit, np.asarray(rows.column("task_type").to_pylist(), dtype=object), id_rank)

    def for_type(self, task_type: str | None) -> tuple[np.ndarray, np.ndarray]:
        """(row indices, their unit vectors) of entries for ``task_type`` or any type; all if None."""
        if task_type not in self._by_type:
            if task_type is None:
                index = np.arange(len(self.task_types))
            else:
                index = np.flatnonzero((self.task_types == task_type) | (self.task_types == ANY_TASK_TYPE))
            self._by_type[task_type] = index, np.ascontiguousarray(self.unit[index])
        return self._by_type[task_type]

    def every_subject(self) -> list[BankEntry]:
        """The rows whose key is ``EVERY_SUBJECT`` (about a whole task type), of every task type, by id."""
        if self._every_subject is None:
            self._every_subject = _to_entries(self.rows.filter(pc.equal(self.rows.column("key"), EVERY_SUBJECT)))
        return self._every_subject

    def search(self, query: np.ndarray, limit: int, task_type: str | None) -> list[tuple[BankEntry, float]]:
        """The ``limit`` most cosine-similar rows, equal similarities in id order."""
        index, unit = self.for_type(task_type)
        if not len(index):
            return []
        sims = unit @ (query / np.linalg.norm(query)).astype(np.float32)
        keep = np.arange(len(sims))
        if limit < len(sims):
            kth = np.partition(sims, len(sims) - limit)[len(sims) - limit]
            keep = np.flatnonzero(sims >= kth)
        keep = keep[np.lexsort((self.id_rank[index[keep]], -sims[keep]))][:limit]
        hits = self.rows.take(pa.array(index[keep]))
        by_id = dict(zip(hits.column("id").to_pylist(), sims[keep].tolist()))
        return [(e, by_id[e.id]) for e in _to_entries(hits)]


def read_snapshot(path: Path) -> list[BankEntry]:
    """The entries of a Parquet snapshot written by ``ExperienceBank.snapshot``, sorted by id."""
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise IntegrityError(f"{path}: file is missing") from None
    except (pa.ArrowException, OSError) as err:
        raise IntegrityError(f"{path}: not a readable bank snapshot ({str(err).splitlines()[0]})") from None
    return _to_entries(table)


def open_recorded(folder: Path, embedder: HashEmbedder | MiniLMEmbedder) -> tuple[ExperienceBank, int, int]:
    """A run's bank (``runs/<run>/bank``) for reading, checked against the run's record: (bank, version,
    round). The table must be at the version the run recorded after its last bank update
    (``bank_versions.json`` beside the folder); anything else (a lost LanceDB manifest, an edit since) is
    refused rather than read at another version."""
    from edge.files import read_json

    folder = Path(folder)
    record = folder.parent / "bank_versions.json"
    if not (folder / "bank.lance").is_dir():
        raise IntegrityError(f"{folder}: no bank table here (expected runs/<run>/bank)")
    if not record.exists():
        raise IntegrityError(f"{record}: missing; without the run's record the bank's version cannot be checked")
    versions = {int(k): int(v) for k, v in read_json(record).items()}
    last_round = max(versions)
    bank = ExperienceBank.open(folder, embedder)
    if bank.version() != versions[last_round]:
        raise IntegrityError(f"{folder}: the table is at version {bank.version()}, but the run recorded version "
                             f"{versions[last_round]} after round {last_round} ({record.name}); a version manifest "
                             "under bank.lance/_versions is missing or the table changed after the run")
    return bank, versions[last_round], last_round


OPTIONAL_COLUMNS = {"revises"}
"""Columns a bank written by an older EDGE may lack; every other column of ``bank_schema`` is required."""


def _reads(method):
    """Say which bank could not be read, in one line, when LanceDB fails (a data file or manifest gone)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (RuntimeError, OSError) as err:
            first = (str(err).strip().splitlines() or [""])[0].split(", /root/")[0][:300]
            raise IntegrityError(f"{self.folder / self.name}: the bank table cannot be read ({first})") from err
    return wrapper


class ExperienceBank:
    """Guidance entries with their embeddings, credit and audit trail, in one LanceDB table."""

    def __init__(self, table, embedder: HashEmbedder | MiniLMEmbedder, folder: Path, name: str,
                 in_memory: bool = True):
        # Use ExperienceBank.open; the constructor trusts that the table matches the embedder.
        self._tbl = table
        self.embedder = embedder
        self.folder = folder
        self.name = name
        self.in_memory = in_memory
        """Answer similarity searches from ``ActiveVectors`` (else a LanceDB query each time)."""
        self._active: ActiveVectors | None = None
        # (version, entries) of type_entries when not in memory; in memory they come from ``_active``.
        self._every_subject: tuple[int, list[BankEntry]] | None = None
        self._last_issued = 0  # ids handed out by next_id() in this process, maybe not added yet

    # ----- lifecycle ----------------------------------------------------------------------
    @classmethod
    def open(cls, folder: Path, embedder: HashEmbedder | MiniLMEmbedder, table: str = "bank",
             in_memory: bool = True) -> ExperienceBank:
        """Open the table in ``folder``, creating folder and table when missing."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        # Check the manifest on every read: another ExperienceBank (or process) on the same folder
        # may have written since, and the default (never re-check) would serve stale rows.
        db = lancedb.connect(folder, read_consistency_interval=timedelta(0))
        if table in db.list_tables().tables:
            tbl = db.open_table(table)
            meta = tbl.schema.metadata or {}
            stored_name = meta.get(b"edge.embedder", b"").decode()
            stored_dim = int(meta.get(b"edge.dim", b"0").decode() or 0)
            if stored_dim != embedder.dim or (stored_name and stored_name != embedder.name):
                raise ValueError(
                    f"bank table {folder / table} was built with embedder {stored_name!r} ({stored_dim}-d); "
                    f"cannot open it with {embedder.name!r} ({embedder.dim}-d)"
                )
            missing = [name for name in _FIELDS if name not in tbl.schema.names and name not in OPTIONAL_COLUMNS]
            if missing:
                raise IntegrityError(f"bank table {folder / table}: column(s) {', '.join(missing)} missing "
                                     f"(expected every column of edge.bank.store.bank_schema)")
        else:
            tbl = db.create_table(table, schema=bank_schema(embedder.dim, embedder.name))
        return cls(tbl, embedder, folder, table, in_memory)

    @_reads
    def __len__(self) -> int:
        return self._tbl.count_rows()

    # ----- writes -------------------------------------------------------------------------
    def _with_vectors(self, entries: list[BankEntry]) -> list[BankEntry]:
        """Copies of the entries, with vectors computed for those that have none."""
        todo = [e for e in entries if not len(e.vector)]
        vecs = self.embedder.embed([e.key or e.text for e in todo]) if todo else np.zeros((0, self.embedder.dim))
        filled = {id(e): v.tolist() for e, v in zip(todo, vecs)}
        out = []
        for e in entries:
            vector = filled.get(id(e), list(e.vector))
            if len(vector) != self.embedder.dim:
                raise ValueError(f"entry {e.id}: vector has {len(vector)} values, the bank needs {self.embedder.dim}")
            out.append(dataclasses.replace(e, vector=vector))
        return out

    @staticmethod
    def _check_unique(entries: list[BankEntry]) -> None:
        seen: set[str] = set()
        for e in entries:
            if e.id in seen:
                raise ValueError(f"duplicate id {e.id!r} in the entries given")
            seen.add(e.id)

    def _existing_ids(self, ids: list[str]) -> set[str]:
        if not ids or not len(self):
            return set()
        where = "id IN (" + ", ".join(sql_string(i) for i in ids) + ")"
        rows = self._tbl.search().where(where).select(["id"]).limit(len(ids)).to_arrow()
        return set(rows.column("id").to_pylist())

    def add(self, entries: list[BankEntry]) -> None:
        """Insert new entries; an id already in the bank (or twice in ``entries``) is a ValueError."""
        if not entries:
            return
        self._check_unique(entries)
        clash = self._existing_ids([e.id for e in entries])
        if clash:
            raise ValueError(f"id already in the bank: {', '.join(sorted(clash))}")
        rows = [_to_row(e) for e in self._with_vectors(entries)]
        self._tbl.add(pa.Table.from_pylist(rows, schema=self._tbl.schema))

    def upsert(self, entries: list[BankEntry]) -> None:
        """Replace rows by id (credit, status and history updates); an unknown id is inserted."""
        if not entries:
            return
        self._check_unique(entries)  # LanceDB refuses ambiguous merges; name the id ourselves
        rows = [_to_row(e) for e in self._with_vectors(entries)]
        data = pa.Table.from_pylist(rows, schema=self._tbl.schema)
        self._tbl.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data)

    @_reads
    def next_id(self) -> str:
        """A fresh id (``g000001``, ...): one past the largest in the table or issued by this object.

        Nothing is ever deleted, so the table's largest id survives reopening. After ``restore``
        the counter restarts from the restored rows, so a re-run round makes the same ids again.
        """
        largest = self._last_issued
        if len(self):
            for ident in self._tbl.search().select(["id"]).limit(len(self)).to_arrow().column("id").to_pylist():
                match = _ID.match(ident)
                if match:
                    largest = max(largest, int(match.group(1)))
        self._last_issued = largest + 1
        return f"g{self._last_issued:0{_ID_WIDTH}d}"

    # ----- reads --------------------------------------------------------------------------
    @_reads
    def get(self, id: str) -> BankEntry:
        rows = self._tbl.search().where(f"id = {sql_string(id)}").limit(2).to_arrow()
        if rows.num_rows == 0:
            raise KeyError(f"no bank entry with id {id!r}")
        return _to_entries(rows)[0]

    @_reads
    def all(self, status: str | None = None) -> list[BankEntry]:
        """Every entry (or those with ``status``), sorted by id."""
        table = self._tbl.to_arrow()
        if status is not None:
            table = table.filter(pc.equal(table.column("status"), status))
        return _to_entries(table)

    @_reads
    def _search(self, text: str, threshold: float, limit: int, task_type: str | None
                ) -> list[tuple[BankEntry, float]]:
        if limit <= 0:
            return []
        query = self.embedder.embed([text])[0]
        if not np.any(query):  # a text with no words: cosine is undefined, so nothing is similar
            return []
        if self.in_memory:
            hits = self._active_vectors().search(query, limit, task_type)
        else:
            hits = self._search_lancedb(query, limit, task_type)
        out = [(e, s) for e, s in hits if s >= threshold]
        # Best first; equal similarities by id, so ties come back in the same order every run.
        out.sort(key=lambda pair: (-pair[1], pair[0].id))
        return out

    def _active_vectors(self) -> ActiveVectors:
        """``ActiveVectors`` of the table's current version, read again only once the version changed."""
        version = self._tbl.version
        if self._active is None or self._active.version != version:
            self._active = ActiveVectors.of(self._tbl, version)
        return self._active

    def _search_lancedb(self, query: np.ndarray, limit: int, task_type: str | None) -> list[tuple[BankEntry, float]]:
        n = len(self)
        if n == 0:
            return []
        hits = (
            self._tbl.search(query, vector_column_name="vector")
            .distance_type("cosine")
            .where(self._active_for(task_type), prefilter=True)  # filter first: k active rows, not k rows
            .limit(min(limit, n))
            .to_arrow()
        )
        sims = dict(zip(hits.column("id").to_pylist(), (1.0 - float(d) for d in hits.column("_distance").to_pylist())))
        return [(e, sims[e.id]) for e in _to_entries(hits)]

    @_reads
    def type_entries(self, task_type: str) -> list[BankEntry]:
        """Active entries about the whole of ``task_type`` (key ``EVERY_SUBJECT``: knowledge of a task type's
        steps written once for the type), by id. Retrieval adds them for every task of the type
        (``edge.bank.retrieval``) rather than finding them by their key's similarity."""
        if self.in_memory:  # the active rows similarity search holds already
            typed = self._active_vectors().every_subject()
        else:
            version = self._tbl.version
            if self._every_subject is None or self._every_subject[0] != version:
                where = f"status = 'active' AND key = {sql_string(EVERY_SUBJECT)}"
                self._every_subject = (version, _to_entries(self._tbl.search().where(where).limit(None).to_arrow()))
            typed = self._every_subject[1]
        # Of this type exactly, not also of ANY_TASK_TYPE as search takes them: a type's steps are written for it.
        return [e for e in typed if e.task_type == task_type]

    def retrieve(self, query: str, k: int, threshold: float, task_type: str | None = None
                 ) -> list[tuple[BankEntry, float]]:
        """Up to ``k`` active entries with cosine similarity >= ``threshold`` to ``query``, best first."""
        return self._search(query, threshold, k, task_type)

    def similar(self, text: str, threshold: float, task_type: str | None = None) -> list[tuple[BankEntry, float]]:
        """Every active entry with similarity >= ``threshold`` to ``text`` (merging, coverage)."""
        return self._search(text, threshold, len(self), task_type)

    @staticmethod
    def _active_for(task_type: str | None) -> str:
        """Active entries written for ``task_type`` or for any task type (``task_type = 'any'``)."""
        where = "status = 'active'"
        if task_type is not None:
            where += f" AND (task_type = {sql_string(task_type)} OR task_type = {sql_string(ANY_TASK_TYPE)})"
        return where

    # ----- versions -----------------------------------------------------------------------
    def version(self) -> int:
        return self._tbl.version

    @_reads
    def checkout(self, version: int) -> list[BankEntry]:
        """The rows as of ``version``, read through a separate handle.

        ``Table.checkout`` would pin *this* handle to the old version and make every later write
        fail, so the live table is never checked out.
        """
        db = lancedb.connect(self.folder)
        return _to_entries(db.open_table(self.name, version=version).to_arrow())

    def restore(self, version: int) -> None:
        """Make the live table equal to ``version`` (as a new version; history is kept)."""
        self._tbl.restore(version)
        self._last_issued = 0  # ids issued after ``version`` are free again (see next_id)

    def optimize(self) -> None:
        """Compact data files and delete every old version (checkout/restore of them then fail)."""
        with warnings.catch_warnings():
            # LanceDB warns that cleanup_older_than=0 breaks concurrent readers of old versions;
            # this is only called explicitly, between rounds, which is exactly when that is wanted.
            warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)")
            self._tbl.optimize(cleanup_older_than=timedelta(0), delete_unverified=True)

    # ----- export -------------------------------------------------------------------------
    @_reads
    def snapshot(self, path: Path) -> Path:
        """Write the whole table (vectors included) to Parquet atomically; returns ``path``.

        Written to a temporary file in the same folder and renamed, so a reader (DVC, a crashed
        run's resume) sees either the old snapshot or the complete new one, never half a file.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        table = self._tbl.to_arrow()
        table = table.take(pc.sort_indices(table, sort_keys=[("id", "ascending")]))
        return write_with(path, lambda tmp: pq.write_table(table, tmp))
