"""``edge data alfworld``: check an ALFWorld data folder, and fill it with the official download.

The official ``alfworld-download`` fetches the games from GitHub releases. On a machine without
internet it cannot, so this says which parts of the folder are missing and how to supply them
(copy a folder holding ``json_2.1.1/`` and ``logic/`` from elsewhere and point ALFWORLD_DATA at it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

from edge.envs.alfworld.data import DEFAULT_DOWNLOAD_DIR, SPLIT_FOLDERS, AlfworldUnavailable, require_extra

DOWNLOAD_HOST = "https://github.com"


def default_destination() -> Path:
    """Where the data goes: ``$ALFWORLD_DATA``, else alfworld's own default, ``~/.cache/alfworld``."""
    return Path(os.environ.get("ALFWORLD_DATA") or DEFAULT_DOWNLOAD_DIR).expanduser()


def missing_parts(root: Path) -> list[str]:
    """The parts of an ALFWorld data folder that are absent, as paths relative to it."""
    missing = []
    for split, folders in SPLIT_FOLDERS.items():
        if not any((root / "json_2.1.1" / name).is_dir() for name in folders):
            missing.append(" or ".join(f"json_2.1.1/{name}/" for name in folders) + f" (split {split})")
    for name in ("alfred.pddl", "alfred.twl2"):
        if not (root / "logic" / name).is_file():
            missing.append(f"logic/{name}")
    return missing


def online(timeout: float = 5.0) -> bool:
    """Whether the download host answers at all."""
    try:
        urllib.request.urlopen(urllib.request.Request(DOWNLOAD_HOST, method="HEAD"), timeout=timeout)
        return True
    except OSError:
        return False


def fetch(destination: Path) -> list[str]:
    """Run ``alfworld-download --data-dir destination`` unless the folder is already complete; return
    what is still missing afterwards. Raises :class:`AlfworldUnavailable` when it cannot download."""
    require_extra()
    missing = missing_parts(destination)
    if not missing:
        return []
    if not online():
        raise AlfworldUnavailable(
            f"{destination} lacks {', '.join(missing)}, and {DOWNLOAD_HOST} cannot be reached to run the "
            "official alfworld-download. Copy a folder holding json_2.1.1/ and logic/ from a machine that has "
            "one (this project's machines: <repo>/../shared/data/alfworld) and export ALFWORLD_DATA=<that folder>")
    script = Path(sys.executable).with_name("alfworld-download")
    command = [str(script)] if script.exists() else [shutil.which("alfworld-download") or "alfworld-download"]
    environment = os.environ | {"ALFWORLD_DATA": str(destination)}
    subprocess.run([*command, "--data-dir", str(destination)], check=True, env=environment)
    return missing_parts(destination)
