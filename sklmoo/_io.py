"""Atomic file writes: a reader never sees a half-written file, and an interrupted write leaves
the previous version in place."""

import os
import pathlib


def atomic_write(path, write):
    """Write ``path`` by calling ``write(file)`` on a temporary file in the same directory, then
    renaming it over ``path`` (``os.replace`` is atomic on POSIX and Windows).

    Parameters
    ----------
    path : str or Path
    write : callable
        Receives a binary file object open for writing.

    Returns
    -------
    Path
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def atomic_write_text(path, text):
    """:func:`atomic_write` for a UTF-8 text."""
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))
