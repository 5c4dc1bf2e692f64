"""Files written whole or not at all: results, rows, the paper's generated sources."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def write_atomic(path: str | os.PathLike, content: str | bytes) -> None:
    """Write ``content`` (text or bytes) to ``path`` through a temporary file and a rename.

    The temporary file lives in ``$ARTIFACT_TMPDIR`` (default ``.tmp/`` in
    the working directory), outside ``data/``, so that a killed run leaves
    no partial file beside the results; it must be on the file system of
    ``path`` (``os.replace`` raises OSError otherwise).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmpdir = Path(os.environ.get("ARTIFACT_TMPDIR", ".tmp"))
    tmpdir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=tmpdir, prefix=path.name + ".", suffix=".part")
    try:
        with os.fdopen(fd, "wb" if isinstance(content, bytes) else "w") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes files private; results are not
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    """Write rows as JSON lines, atomically (:func:`write_atomic`)."""
    write_atomic(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
