"""Hostile files for the loading tests: zip archives (``.npz``, ``torch.save`` files) whose
members inflate to far more than the archive's size on disk, and a measure of the memory a
load costs.

The archives are real: their deflate streams decompress to the sizes their members declare
and their CRCs match, so a loader that does not refuse them first inflates them.
"""

import struct
import subprocess
import sys
import textwrap
import zipfile
import zlib

_CHUNK = 1 << 20


def _deflated(pieces):
    """(raw deflate stream, CRC-32, size) of the concatenation of ``pieces``: ``bytes``, or
    ``(byte, count)`` for ``count`` copies of one byte (compressed once per MiB and repeated,
    so that building a GiB costs well under a second)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    out, crc, size = [], 0, 0
    for piece in pieces:
        if isinstance(piece, bytes):
            out.append(comp.compress(piece) + comp.flush(zlib.Z_FULL_FLUSH))
            crc, size = zlib.crc32(piece, crc), size + len(piece)
            continue
        byte, count = piece
        whole, rest = divmod(count, _CHUNK)
        chunk = byte * _CHUNK
        if whole:
            # after a full flush a block needs no history: its bytes may be repeated as they are
            block = comp.compress(chunk) + comp.flush(zlib.Z_FULL_FLUSH)
            out.append(block * whole)
            for _ in range(whole):
                crc = zlib.crc32(chunk, crc)
        if rest:
            out.append(comp.compress(chunk[:rest]) + comp.flush(zlib.Z_FULL_FLUSH))
            crc = zlib.crc32(chunk[:rest], crc)
        size += count
    out.append(comp.flush())
    return b"".join(out), crc, size


def write_zip(path, members):
    """Write a zip archive (no zip64: every size below 4 GiB) of ``{name: pieces}``.

    ``pieces`` is ``bytes`` (stored uncompressed, as ``torch.save`` and ``np.savez`` do) or a
    list of pieces as in :func:`_deflated` (deflated)."""
    blob, central = bytearray(), bytearray()
    for name, pieces in members.items():
        raw = name.encode("utf-8")
        if isinstance(pieces, bytes):
            data, crc, size, method = pieces, zlib.crc32(pieces), len(pieces), zipfile.ZIP_STORED
        else:
            (data, crc, size), method = _deflated(pieces), zipfile.ZIP_DEFLATED
        offset = len(blob)
        blob += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc,
                            len(data), size, len(raw), 0) + raw + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21,
                               crc, len(data), size, len(raw), 0, 0, 0, 0, 0, offset) + raw
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central),
                      len(blob), 0)
    with open(path, "wb") as f:
        f.write(bytes(blob) + bytes(central) + end)
    return path


def members_of(path):
    """``{name: bytes}`` of an archive, in its order."""
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def inflated_member(path, suffix, count, *, keep=True):
    """Rewrite the ``torch.save`` / ``np.savez`` archive ``path`` with the member whose name ends
    in ``suffix`` followed by ``count`` zero bytes, deflated (the rest stored as they were). With
    ``keep`` the member's own bytes come first (a pickle still ends at its STOP)."""
    members = members_of(path)
    name = next(n for n in members if n.endswith(suffix))
    members[name] = ([members[name]] if keep else []) + [(b"\0", count)]
    return write_zip(path, members)


def peak_rss_of(setup, action, timeout=120):
    """Run ``setup`` then ``action`` (Python source) in a fresh interpreter; return the
    increase of its peak resident memory (bytes) during ``action`` and what ``action`` printed.

    ``action`` is expected to print the exception it caught; the peak is ``ru_maxrss`` after
    it minus before it (Linux reports KiB)."""
    code = "\n".join([
        "import resource",
        textwrap.dedent(setup),
        "_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss",
        textwrap.dedent(action),
        "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - _before)",
    ])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("PEAK "), done.stdout + done.stderr
    return int(lines[-1].split()[1]) * 1024, "\n".join(lines[:-1])
