"""How a run writes and reads its files: atomically, sealed by a manifest, verified, one writer at a time.

A run folder is the only record of a training run, and every later stage, resume, evaluation and report
trusts what is in it. So:

- **Atomic writes** (``write_bytes``, ``write_json``, ``atomic_folder``): a file is written under a
  temporary name unique to the process, then renamed over the target, so a reader sees the old file or
  the whole new one. A killed writer leaves only a temporary file, which ``remove_leftovers`` deletes the
  next time a process takes the folder's lock.
- **Manifests** (``seal``, ``verify``): after a stage has written its files, it records their sizes and
  SHA-256 (and, for rollouts, rows and groups) with the run's parameter hash in the folder's
  ``manifest.json``, written last. A stage is complete when the manifest says so, not when a file exists,
  and a reader checks a file against the manifest before trusting it. Checkpoint folders carry their own
  manifest (``seal_folder`` / ``verify_folder``) so ``load_policy`` can check any of them.
- **Errors** name the file and what was expected, on one line (``IntegrityError``).
- **One writer per run folder** (``run_lock``): an exclusive ``flock`` held for the whole command and
  released by the kernel when the process ends, however it ends.
- **Fault points** (``fault_point``): ``EDGE_FAULT=<name>`` kills the process with SIGKILL at that point,
  which is how ``tests/reliability`` proves that a kill anywhere loses nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

MANIFEST = "manifest.json"
"""A folder's record of what its stages wrote (a run folder and each ``round_<k>``)."""
FOLDER_MANIFEST = "edge_manifest.json"
"""A checkpoint folder's record of its own files, written by ``save_policy``."""
LOCK = ".edge.lock"
"""The lock file of a run folder (its content, the holder's pid, is only for the error message)."""
_LEFTOVER = re.compile(r"^\..+\.tmp$")
"""Temporary names this module makes: ``.<target>.<random>.tmp`` (files and folders)."""


class IntegrityError(ValueError):
    """A file a run wrote is missing, damaged, or not the one its manifest recorded."""


class RunInUseError(RuntimeError):
    """Another process holds the run folder's lock."""


# ----- fault injection ------------------------------------------------------------------------
_fault_hits: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Die here, as ``kill -9`` would, when ``EDGE_FAULT`` names this point (tests only):
    ``EDGE_FAULT=write:eval.json`` at the first time this process reaches it, ``...#3`` at the third."""
    wanted = os.environ.get("EDGE_FAULT")
    if not wanted:
        return
    point, _, nth = wanted.partition("#")
    if point == name:
        _fault_hits[name] = _fault_hits.get(name, 0) + 1
        if _fault_hits[name] == int(nth or 1):
            os.kill(os.getpid(), signal.SIGKILL)


# ----- atomic writes --------------------------------------------------------------------------
def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def _temporary_name(path: Path, folder: bool = False) -> Path:
    """A fresh temporary name beside ``path``, unique to this process and call, with the permissions a
    plain ``open`` would give (``mkstemp`` makes files only their owner can read)."""
    if folder:
        made = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        os.chmod(made, 0o777 & ~_UMASK)
        return made
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(name, 0o666 & ~_UMASK)
    return Path(name)


def write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file, fsync, rename)."""
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    return write_with(path, write)


def write_json(path: Path, data) -> Path:
    """Write ``data`` as indented JSON, atomically."""
    return write_bytes(path, (json.dumps(data, indent=2, default=str) + "\n").encode())


def write_with(path: Path, writer) -> Path:
    """Atomically write ``path`` through ``writer(temporary_path)`` (for Parquet and other libraries)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary_name(path)
    try:
        writer(tmp)
        fault_point(f"write:{path.name}")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


@contextmanager
def atomic_folder(path: Path) -> Iterator[Path]:
    """Fill a temporary folder, then put it in ``path``'s place (replacing an older one).

    The old folder is moved aside before the new one is renamed in, so at every moment ``path`` is either
    the complete old folder, absent, or the complete new one; the stage's manifest decides which counts."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary_name(path, folder=True)
    try:
        yield tmp
        fault_point(f"write:{path.name}/")
        if path.exists():
            old = _temporary_name(path, folder=True)
            old.rmdir()
            os.replace(path, old)
            shutil.rmtree(old)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def remove_leftovers(folder: Path) -> list[Path]:
    """Delete the temporary files and folders killed writers left in ``folder`` and its round folders.

    Only safe while holding the folder's lock (no other writer can be using them)."""
    folder = Path(folder)
    removed = []
    for parent in [folder, *sorted(p for p in folder.glob("round_*") if p.is_dir())]:
        for item in parent.iterdir():
            if _LEFTOVER.match(item.name):
                shutil.rmtree(item) if item.is_dir() else item.unlink()
                removed.append(item)
    return removed


# ----- reading -------------------------------------------------------------------------------
def read_json(path: Path):
    """The JSON in ``path``; a missing or unparsable file is an ``IntegrityError`` naming it."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise IntegrityError(f"{path}: file is missing") from None
    except (OSError, UnicodeDecodeError) as err:
        raise IntegrityError(f"{path}: cannot be read ({err.__class__.__name__}: {err})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise IntegrityError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def describe_file(path: Path) -> dict:
    """Size and SHA-256 of a file: what a manifest records of it."""
    return {"bytes": Path(path).stat().st_size, "sha256": sha256_of(path)}


def params_hash(params: dict) -> str:
    """The hash of a run's identity: its parameters, minus ``train.rounds`` (a run may be extended) and
    ``train.runs_dir`` (where the folder lives is not what it computed)."""
    identity = json.loads(json.dumps(params))
    identity.get("train", {}).pop("rounds", None)
    identity.get("train", {}).pop("runs_dir", None)
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


# ----- manifests -----------------------------------------------------------------------------
def read_manifest(folder: Path) -> dict:
    """A folder's manifest, or an empty one (no stage sealed yet)."""
    path = Path(folder) / MANIFEST
    if not path.exists():
        return {"params_sha256": None, "stages": {}, "files": {}}
    manifest = read_json(path)
    if not isinstance(manifest, dict) or not {"stages", "files"} <= manifest.keys():
        raise IntegrityError(f"{path}: not an EDGE manifest (expected 'stages' and 'files')")
    return manifest


def seal(folder: Path, stage: str, files: list[str], params_sha256: str, details: dict | None = None) -> None:
    """Record that ``stage`` is complete: its ``files`` (relative to ``folder``) with sizes, hashes and
    ``details`` (per file name: extra facts such as row counts), under the run's parameter hash."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    if manifest["params_sha256"] not in (None, params_sha256):
        raise IntegrityError(f"{folder / MANIFEST}: sealed under other parameters than this run's params.json")
    manifest["params_sha256"] = params_sha256
    for name in files:
        manifest["files"][name] = describe_file(folder / name) | (details or {}).get(name, {})
    manifest["stages"][stage] = sorted(files)
    write_json(folder / MANIFEST, manifest)


def is_sealed(folder: Path, stage: str) -> bool:
    """Whether ``stage`` sealed its files in ``folder`` (the files themselves are checked when read)."""
    return stage in read_manifest(folder)["stages"]


def verify(folder: Path, name: str) -> Path:
    """``folder/name`` as ``folder``'s manifest recorded it, else an ``IntegrityError`` saying what differs."""
    path = Path(folder) / name
    recorded = read_manifest(folder)["files"].get(name)
    if recorded is None:
        raise IntegrityError(f"{path}: not recorded in {Path(folder) / MANIFEST} (written by no completed stage)")
    return _check_file(path, recorded, f"its stage recorded it in {MANIFEST}")


def _check_file(path: Path, recorded: dict, where: str) -> Path:
    """``path`` has the size and SHA-256 ``recorded``; ``where`` says which record (for the message)."""
    if not path.is_file():
        raise IntegrityError(f"{path}: file is missing ({where})")
    size = path.stat().st_size
    if size != recorded["bytes"]:
        raise IntegrityError(f"{path}: {size} bytes, the manifest recorded {recorded['bytes']} (truncated or "
                             "replaced after it was written)")
    if sha256_of(path) != recorded["sha256"]:
        raise IntegrityError(f"{path}: content differs from the manifest's SHA-256 (damaged or edited after "
                             "it was written)")
    return path


def seal_folder(folder: Path) -> Path:
    """Write ``folder``'s own manifest: every file in it with size and hash (a checkpoint, say)."""
    folder = Path(folder)
    files = {str(p.relative_to(folder)): describe_file(p) for p in sorted(folder.rglob("*"))
             if p.is_file() and p.name != FOLDER_MANIFEST}
    return write_json(folder / FOLDER_MANIFEST, {"files": files})


def verify_folder(folder: Path, required: bool = False) -> bool:
    """Check every file ``seal_folder`` recorded; False when the folder has no manifest (and none is
    ``required``: a model from elsewhere), an ``IntegrityError`` naming the first bad file otherwise."""
    folder = Path(folder)
    manifest_file = folder / FOLDER_MANIFEST
    if not manifest_file.exists():
        if required:
            raise IntegrityError(f"{folder}: no {FOLDER_MANIFEST}; this checkpoint was not completely written")
        return False
    recorded = read_json(manifest_file)
    for name, facts in recorded.get("files", {}).items():
        _check_file(folder / name, facts, f"recorded in the checkpoint's {FOLDER_MANIFEST}")
    return True


# ----- one writer per run folder ---------------------------------------------------------------
_held: dict[Path, list] = {}
"""The run folders this process holds: path -> [lock, how many holders in this process]."""


def acquire_run_lock(folder: Path) -> None:
    """Take ``folder``'s lock for this process (again: counted), or raise ``RunInUseError`` at once.

    On the first take, temporary files a killed writer left are removed: nobody else can be writing."""
    key = Path(folder).resolve()
    if key in _held:
        _held[key][1] += 1
        return
    lock = FileLock(str(key / LOCK), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RunInUseError(f"run folder {folder} is in use by another edge process; wait for it to finish "
                            "or use another train.run_name") from None
    _held[key] = [lock, 1]
    remove_leftovers(key)


def release_run_lock(folder: Path) -> None:
    """Give back one take of ``folder``'s lock; the last one releases it."""
    key = Path(folder).resolve()
    if key not in _held:
        return
    _held[key][1] -= 1
    if _held[key][1] == 0:
        _held.pop(key)[0].release()


@contextmanager
def run_lock(folder: Path) -> Iterator[None]:
    acquire_run_lock(folder)
    try:
        yield
    finally:
        release_run_lock(folder)
