"""Files the project writes and reads: atomic writes (a reader never sees a half-written file, and
an interrupted write leaves the previous version in place), the ownership of a run directory,
and the checks that make reading a hostile file cheap: declared sizes are bounded before
anything is decompressed or parsed."""

import contextlib
import errno
import json
import os
import pathlib
import stat
import zipfile
import zlib

#: the deepest nesting :func:`read_json` accepts (sklmoo's own JSON files nest 2 to 5 levels)
MAX_JSON_DEPTH = 64


def _temporary(path):
    """The temporary :func:`atomic_write` writes ``path`` through (same directory)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _replace(tmp, path):
    """Rename ``tmp`` over ``path``, keeping the permissions of the file it replaces (a file
    made private with ``chmod 600`` stays private); a new file keeps the temporary's."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)


@contextlib.contextmanager
def atomic_files(paths):
    """Write several files atomically through code that takes paths: yields a dict of the
    paths to write to -- a temporary in the file's directory for each regular file (or new
    one), the path itself for anything else (``os.devnull``, a pipe) -- with the same keys;
    when the block ends without an error each temporary that was written is synced to disk and
    renamed over its file (a symbolic link's target, not the link), one after the other;
    otherwise they are removed and the files keep their previous versions. A temporary the
    block did not write leaves its file alone.

    Parameters
    ----------
    paths : dict of str or Path
        Each file's final path: distinct files, none a directory, each in an existing
        directory (``ValueError`` / ``IsADirectoryError`` / ``FileNotFoundError`` naming it,
        before anything is written).
    """
    targets, seen = {}, {}
    for key, given in paths.items():
        path = pathlib.Path(os.path.realpath(given))          # a link's target is replaced
        if path.is_dir():
            raise IsADirectoryError(f"cannot write {str(given)!r}: it is a directory")
        if not path.parent.is_dir():
            raise FileNotFoundError(f"cannot write {str(given)!r}: the directory "
                                    f"{str(path.parent)!r} does not exist")
        if path in seen:
            raise ValueError(f"{seen[path]} and {key} name the same file {str(given)!r}")
        seen[path] = key
        targets[key] = path
    temporaries = {key: _temporary(path) for key, path in targets.items()
                   if path.is_file() or not path.exists()}
    try:
        yield {key: str(temporaries.get(key, path)) for key, path in targets.items()}
        for key, tmp in temporaries.items():
            if not tmp.exists():
                continue
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            _replace(tmp, targets[key])
    finally:
        for tmp in temporaries.values():
            if tmp.exists():
                tmp.unlink()


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
    tmp = _temporary(path)
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        _replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def atomic_writes(writes):
    """Write several files as one: ``writes`` maps each path to a ``write(file)`` (a binary
    file object open for writing); every file goes to a temporary in its directory (created
    if missing) and the temporaries are renamed only once all are written
    (:func:`atomic_files`), so a write that fails leaves every previous version.

    Parameters
    ----------
    writes : dict of str or Path to callable
    """
    paths = {i: pathlib.Path(path) for i, path in enumerate(writes)}
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_files(paths) as temporaries:
        for i, write in enumerate(writes.values()):
            with open(temporaries[i], "wb") as f:
                write(f)


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


def _describe(file):
    """A file's name for messages: its path, or a file object's ``name`` if it has one."""
    if isinstance(file, (str, os.PathLike)):
        return str(file)
    return str(getattr(file, "name", None) or f"<{type(file).__name__}>")


class ArchiveTooLargeError(ValueError):
    """An archive's members declare more bytes than the state it should hold can need."""


def check_torch_archive(file, limit, *, allow_stored_bytes=False):
    """Refuse, before ``torch.load`` reads anything, a file that is not a ``torch.save`` zip
    archive or whose members declare more than ``limit`` bytes once decompressed.

    ``torch.load`` allocates every member it reads at its declared size and inflates deflated
    members: a few MB of deflated zeros cost GBs. The declared sizes come from the zip's
    central directory, which torch's reader trusts too, so bounding them bounds what the load
    allocates.

    Parameters
    ----------
    file : str, path or binary file object
        A file object is read from its current position and put back there.
    limit : int
        Bytes the members may declare in total, derived from what the caller expects the file
        to hold.
    allow_stored_bytes : bool, default=False
        Also accept the bytes of members stored uncompressed (what ``torch.save`` writes):
        their content is present in the file, so loading them costs the file's own size, not
        an amplification of it. For states whose legitimate size is not known in advance (an
        L2E estimator's draws).

    Returns
    -------
    int
        The members' declared size in total.

    Raises
    ------
    ArchiveTooLargeError
        Naming the file and the sizes, if the members declare more than allowed.
    ValueError
        Naming the file, if it is not a zip archive (a truncated file, one of torch's legacy
        format, or no torch file at all) or a member does not match its CRC-32 (damaged
        data, read after the sizes are checked).
    """
    name = _describe(file)
    if isinstance(file, (str, os.PathLike)):
        _refuse_special_file(file, name)
        with open(file, "rb") as f:
            _refuse_special_file(f, name)
            return _check_torch_archive(f, name, limit, allow_stored_bytes)
    _refuse_special_file(file, name)
    try:
        start = file.tell()
    except (AttributeError, OSError) as exc:
        raise ValueError(f"cannot read {name}: a file object must be seekable to be checked "
                         f"before loading ({type(exc).__name__}: {exc})") from None
    try:
        return _check_torch_archive(file, name, limit, allow_stored_bytes)
    finally:
        file.seek(start)


def _refuse_special_file(file, name):
    """Raise OSError naming ``file`` (a path, or a file object with a descriptor) if it exists
    and is not a regular file: a device such as /dev/zero streams without end and a FIFO
    blocks, so neither is read. A missing path is left to ``open``."""
    if isinstance(file, (str, os.PathLike)):
        if os.path.exists(file) and not os.path.isfile(file):
            raise OSError(f"{name} is not a regular file")
        return
    try:
        mode = os.fstat(file.fileno()).st_mode
    except (AttributeError, OSError, ValueError):      # an in-memory buffer: no descriptor
        return
    if not stat.S_ISREG(mode):
        raise OSError(f"{name} is not a regular file")


#: bytes read at a time when an archive's members are checked against their CRC-32
CHECK_CHUNK_BYTES = 2 ** 20


def _check_torch_archive(f, name, limit, allow_stored_bytes):
    start = f.tell()
    on_disk = f.seek(0, os.SEEK_END) - start
    f.seek(start)
    try:
        with zipfile.ZipFile(f) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as exc:
        raise ValueError(f"{name} is not a zip archive written by torch.save: it is truncated, "
                         f"of torch's legacy format (not read) or no torch file at all "
                         f"({type(exc).__name__}: {exc})") from None
    declared = sum(m.file_size for m in members)
    if allow_stored_bytes:
        stored = sum(m.compress_size for m in members if m.compress_type == zipfile.ZIP_STORED)
        limit += min(stored, on_disk)
    if declared > limit:
        largest = max(members, key=lambda m: m.file_size)
        raise ArchiveTooLargeError(
            f"{name}: its members declare {declared} bytes once decompressed, more than the "
            f"{limit} bytes expected for this state (the largest, {largest.filename!r}, "
            f"{largest.file_size} bytes in {largest.compress_size} on disk); refusing to load it")
    # every member read once, within the sizes just bounded, against its CRC-32 (torch's
    # reader does not check them: damaged tensor data would load as other numbers)
    f.seek(start)
    try:
        with zipfile.ZipFile(f) as archive:
            for member in archive.infolist():
                with archive.open(member) as stream:
                    while stream.read(CHECK_CHUNK_BYTES):
                        pass
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error) as exc:
        raise ValueError(f"{name} is corrupted: {type(exc).__name__}: {exc}") from None
    return declared


def read_json(file, max_bytes, max_depth=MAX_JSON_DEPTH):
    """Parse a JSON file of at most ``max_bytes`` bytes nested at most ``max_depth`` levels
    deep, checking the size before parsing.

    Parameters
    ----------
    file : str, path or file object
        A file object (text or binary) is read from its current position and put back there.
    max_bytes : int
    max_depth : int, default=MAX_JSON_DEPTH

    Returns
    -------
    object
        The parsed value.

    Raises
    ------
    OSError
        If the file cannot be opened or read.
    ValueError
        Naming the file: larger than ``max_bytes``, not UTF-8, not JSON, or nested too deep
        (including deeper than Python's recursion limit lets ``json`` parse).
    """
    name = _describe(file)
    if isinstance(file, (str, os.PathLike)):
        if not os.path.exists(file):
            # as open() would (skorch's LoadInitState expects it of a checkpoint not yet written)
            raise FileNotFoundError(errno.ENOENT, "no such file", name)
        # a FIFO or a device would block or stream forever; a directory cannot be read
        _refuse_special_file(file, name)
        with open(file, "rb") as f:
            data = f.read(max_bytes + 1)
    else:
        _refuse_special_file(file, name)
        start = file.tell()
        try:
            data = file.read(max_bytes + 1)
        finally:
            file.seek(start)
    if len(data) > max_bytes:
        raise ValueError(f"{name} is larger than {max_bytes} bytes")
    try:
        value = json.loads(data)
    except RecursionError:
        raise ValueError(f"{name} nests JSON deeper than Python can parse") from None
    except ValueError as exc:           # JSONDecodeError and UnicodeDecodeError
        raise ValueError(f"{name} is not UTF-8 JSON ({type(exc).__name__}: {exc})") from None
    depth = json_depth(value)
    if depth > max_depth:
        raise ValueError(f"{name} nests JSON {depth} levels deep, more than {max_depth}")
    return value


def json_depth(value):
    """The nesting depth of a parsed JSON value (a scalar 0, ``[]`` 1, ``[[1]]`` 2), without
    recursion."""
    depth, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (list, dict)):
            depth = max(depth, level + 1)
            stack.extend((child, level + 1) for child in
                         (item.values() if isinstance(item, dict) else item))
    return depth


def backed_by_storage(tensor):
    """Whether every element of a loaded ``tensor`` has bytes of its own in its storage.

    A ``torch.save`` file records each tensor as a view (offset, shape, strides) of a storage;
    a view with a zero or overlapping stride claims more elements than its storage holds. No
    tensor sklmoo saves is such a view: a file holding one was forged to make its reader
    allocate (a copy, a resize to the claimed shape) far more than the file contains.
    """
    n = tensor.numel()
    if n == 0:
        return True
    needed = max(n, tensor.storage_offset()
                 + 1 + sum((s - 1) * st for s, st in zip(tensor.shape, tensor.stride())))
    return tensor.untyped_storage().nbytes() >= needed * tensor.element_size()


def tensors_in(value):
    """The tensors in a nested structure of dicts, lists and tuples (a state dict, an
    optimiser's state, a checkpoint), without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif hasattr(item, "untyped_storage"):
            yield item


def tensor_bytes(value):
    """The bytes of the tensors in ``value`` (:func:`tensors_in`): what ``torch.save`` stores
    of it, beyond the pickled structure."""
    return sum(t.numel() * t.element_size() for t in tensors_in(value))
