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


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:             # PermissionError: alive, owned by another user
        return True
    return True


def remove_stale_temporaries(directory, names):
    """Remove the temporaries :func:`atomic_write` left for ``names`` in ``directory`` when
    its writer died before the rename (SIGKILL, power loss): ``.NAME.PID.tmp`` whose PID is
    not a live process, or is this process (which is not writing while it calls this).

    Call it only while owning ``directory`` (:class:`DirectoryLock`), so that no live writer
    of these names can be racing with it.

    Returns
    -------
    list of Path
        The files removed.
    """
    directory = pathlib.Path(directory)
    removed = []
    for name in names:
        for tmp in directory.glob(f".{name}.*.tmp"):
            pid = tmp.name[len(name) + 2:-len(".tmp")]
            if not pid.isdigit() or (int(pid) != os.getpid() and _pid_alive(int(pid))):
                continue
            try:
                tmp.unlink()
            except FileNotFoundError:
                continue
            removed.append(tmp)
    return removed


class DirectoryInUseError(RuntimeError):
    """Another process owns the directory (see :class:`DirectoryLock`)."""

    def __init__(self, directory, pid):
        self.directory, self.pid = directory, pid
        holder = f"pid {pid}" if pid is not None else "a process that has not recorded its pid"
        super().__init__(f"{directory} is in use by another process ({holder})")


class DirectoryLock:
    """Exclusive ownership of a directory by this process, for as long as it holds the lock:
    an advisory lock (``flock``) on ``DIRECTORY/.lock``, which records the owner's pid.

    The kernel releases the lock when the owner exits, however it exits (SIGKILL included):
    a dead owner never blocks a later run, and no pid has to be checked for staleness. The
    pid in the file is only for the error message. The file itself stays after release:
    deleting it would let two processes lock two different files of the same name.

    Parameters
    ----------
    directory : str or Path
        Must exist.

    Raises
    ------
    DirectoryInUseError
        From :meth:`acquire`, at once (no waiting), if another process holds the lock.
    OSError
        From :meth:`acquire`, if the lock file cannot be created (e.g. a read-only directory).

    Examples
    --------
    >>> import tempfile
    >>> from sklmoo._io import DirectoryLock, DirectoryInUseError
    >>> directory = tempfile.mkdtemp()
    >>> with DirectoryLock(directory):
    ...     try:
    ...         DirectoryLock(directory).acquire()      # a second owner, even in-process
    ...     except DirectoryInUseError:
    ...         print("refused")
    refused
    """

    def __init__(self, directory):
        self.directory = pathlib.Path(directory)
        self.path = self.directory / ".lock"
        self._fd = None

    def acquire(self):
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _lock_nonblocking(fd)
        except OSError:
            try:
                os.lseek(fd, 0, os.SEEK_SET)
                text = os.read(fd, 32).decode("ascii", "replace").strip()
            except OSError:             # Windows refuses to read a locked byte
                text = ""
            finally:
                os.close(fd)
            raise DirectoryInUseError(self.directory, int(text) if text.isdigit() else None
                                      ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        self._fd = fd
        return self

    def release(self):
        if self._fd is not None:
            os.close(self._fd)          # closing the descriptor releases the lock
            self._fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def _lock_nonblocking(fd):
    """Lock the whole file ``fd`` exclusively or raise OSError (BlockingIOError) at once."""
    try:
        import fcntl
    except ImportError:                 # Windows: a byte-range lock on the first byte
        import msvcrt

        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
