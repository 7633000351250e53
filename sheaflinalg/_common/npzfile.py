"""Reading ``.npz`` files that may be corrupt or crafted: never unpickles, never trusts an entry.

:func:`read_npz` reads every entry of the archive in full, after checking its
``.npy`` header against the bytes the entry really holds (so a crafted
header cannot make it allocate or read more than the file has); any defect
of the archive becomes one :class:`FileFormatError` naming the file and the
entry.  The :class:`NpzEntries` it returns hands the entries out only
through checked accessors (dtype, shape, finiteness), so that nothing read
from a file reaches the unchecked compiled kernels unchecked.
"""

import hashlib
import json
import math
import os
import struct
import warnings
import zipfile

import numpy as np

from .memory import check_memory
from .validation import check_path


def content_digest(arrays, text=""):
    """SHA-256 (hex) of named float64 arrays and a text: what a file says it holds, to detect later edits.

    Examples
    --------
    >>> content_digest({"x": np.zeros(2)}) == content_digest({"x": np.zeros(2)})
    True
    >>> content_digest({"x": np.zeros(2)}) == content_digest({"x": np.zeros(3)})
    False
    """
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name], dtype=np.float64)
        h.update(f"{name}{a.shape}".encode())
        h.update(a.tobytes())
    h.update(text.encode())
    return h.hexdigest()


class FileFormatError(ValueError):
    """A file that cannot be used: corrupt, truncated, crafted, or not of the expected kind."""


class UnreadEntriesWarning(UserWarning):
    """A file holds entries that its reader does not know and ignores."""


def read_npz(path, what):
    """All entries of the ``.npz`` file ``path`` (a ``what``, e.g. "network file"), checked as arrays.

    Raises
    ------
    FileNotFoundError
        There is no file ``path``.
    FileFormatError
        The file is not a zip archive, an entry is not a ``.npy`` array,
        needs pickle, is truncated or fails its checksum, or appears twice.

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "a.npz")
    >>> np.savez(path, x=np.arange(3.0))
    >>> read_npz(path, "test file").float_array("x", (3,)).tolist()
    [0.0, 1.0, 2.0]
    """
    path = _existing_file(path, what)
    entry = None
    with open(path, "rb") as fp:      # an unreadable file is an OSError (PermissionError, ...), not corrupt
        fp.read(0)
    try:
        arrays = {}
        with zipfile.ZipFile(path) as archive:
            _check_tiling(path, archive)
            _check_declared_sizes(path, archive, what)
            for info in archive.infolist():
                entry = info.filename
                key = _entry_name(path, entry)
                if key in arrays:
                    raise FileFormatError(f"{path}: entry {key!r} appears twice: the file is crafted or corrupt")
                arrays[key] = _read_entry(path, archive, info, key)
                entry = None
    except (FileFormatError, MemoryError):   # MemoryError: the check above, not a corrupt file
        raise
    except Exception as exc:  # noqa: BLE001 - any defect of untrusted bytes is a corrupt file, never a crash
        where = "" if entry is None else f" (entry {entry!r})"
        raise FileFormatError(f"{path}: corrupt or truncated {what}{where}: {type(exc).__name__}: {exc}") from None
    return NpzEntries(path, what, arrays)


def _existing_file(path, what):
    """``path`` checked: a file that exists (a ``what``), not a directory."""
    path = check_path(path, "path")
    if os.path.isdir(path):
        raise FileFormatError(f"{path}: is a directory, not a {what}")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such {what}")
    return path


def _check_tiling(path, archive):
    """The members must tile the file from its start to the central directory, as ``numpy.savez`` writes
    them: a gap means members that a damaged directory no longer lists (their loss could go unnoticed)."""
    members = sorted(archive.infolist(), key=lambda i: i.header_offset)
    starts = [i.header_offset for i in members[1:]] + [archive.start_dir]
    pos = 0
    with open(path, "rb") as fp:
        for info, next_start in zip(members, starts):
            if info.header_offset != pos:
                break
            fp.seek(pos)
            head = fp.read(30)
            if len(head) != 30 or head[:4] != b"PK\x03\x04":
                raise FileFormatError(f"{path}: corrupt .npz archive: no entry header at byte {pos}")
            name_len, extra_len = struct.unpack("<HH", head[26:30])
            pos += 30 + name_len + extra_len + info.compress_size
            # A data descriptor (12 to 24 bytes) follows the data of archives written to a stream.
            if info.flag_bits & 0x08 and next_start - pos in (12, 16, 20, 24):
                pos = next_start
    if pos != archive.start_dir:
        raise FileFormatError(f"{path}: corrupt .npz archive: its directory does not account for all of the "
                              f"file (near byte {pos}): entries were lost or the file was crafted")


#: Deflate expands at most about 1032 times (RFC 1951's longest match per two bits).
_DEFLATE_RATIO = 1032


def _check_declared_sizes(path, archive, what):
    """Sizes the members declare once decompressed, checked before anything is decompressed: possible
    for their compressed sizes (else the file is crafted or corrupt), and within the memory available
    (a small compressed file can legitimately declare gigabytes)."""
    for info in archive.infolist():
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            raise FileFormatError(f"{path}: entry {info.filename!r}: stored sizes disagree ({info.compress_size} "
                                  f"and {info.file_size} bytes): the file is corrupt or truncated")
        if info.file_size > _DEFLATE_RATIO * info.compress_size + 1024:
            raise FileFormatError(f"{path}: entry {info.filename!r} declares {info.file_size} bytes from "
                                  f"{info.compress_size} compressed bytes, more than compression can give: the "
                                  "file is crafted or corrupt")
    check_memory(sum(i.file_size for i in archive.infolist()), f"{path}: the entries of this {what}",
                 "read it on a machine with more memory")


def _entry_name(path, member):
    if not member.endswith(".npy") or member.startswith("/") or ".." in member:
        raise FileFormatError(f"{path}: entry {member!r} is not a .npy array: not an .npz file written by numpy")
    return member[:-4]


def _read_entry(path, archive, info, key):
    """One ``.npy`` member: header checked against the member's size before anything is allocated."""
    if info.header_offset + info.compress_size > os.path.getsize(path):
        raise FileFormatError(f"{path}: entry {key!r} runs past the end of the file: the file is truncated")
    with archive.open(info) as f:
        return _read_npy_stream(f, info.file_size, path, f"entry {key!r}")


def _read_npy_stream(f, size, path, where):
    """The ``.npy`` array of the open binary stream ``f`` of ``size`` bytes (``where``: "entry 'x'" or "file"):
    its header checked against the bytes the stream really holds before anything is allocated; no pickle."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise FileFormatError(f"{path}: {where}: unsupported .npy format version {version}")
    if dtype.hasobject:
        raise FileFormatError(f"{path}: {where} holds Python objects that need pickle; refusing to "
                              "load it (sheaflinalg files hold plain arrays only)")
    if dtype.itemsize == 0:
        raise FileFormatError(f"{path}: {where} has the zero-size dtype {dtype}")
    nbytes = math.prod(shape) * dtype.itemsize
    held = size - f.tell()
    if nbytes != held:
        raise FileFormatError(f"{path}: {where}: its header declares shape {shape} of {dtype} "
                              f"({nbytes} bytes) but it holds {held} bytes: the file is corrupt, truncated "
                              "or crafted")
    data = f.read(nbytes + 1)     # reading to the end makes zipfile check the CRC
    if len(data) != nbytes:
        raise FileFormatError(f"{path}: {where} is truncated ({len(data)} of {nbytes} bytes)")
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()


def read_npy(path, what):
    """The array of the ``.npy`` file ``path`` (a ``what``, e.g. "inputs file"), never unpickled.

    Raises
    ------
    FileNotFoundError
        There is no file ``path``.
    FileFormatError
        Not a ``.npy`` file, an array of Python objects, or a header that does not match the bytes.

    Examples
    --------
    >>> import os, tempfile, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "x.npy")
    >>> np.save(path, np.arange(3.0))
    >>> read_npy(path, "inputs file").tolist()
    [0.0, 1.0, 2.0]
    """
    path = _existing_file(path, what)
    size = os.path.getsize(path)
    check_memory(size, f"{path}: this {what}", "read it on a machine with more memory")
    with open(path, "rb") as fp:
        try:
            return _read_npy_stream(fp, size, path, "file")
        except FileFormatError:
            raise
        except Exception as exc:  # noqa: BLE001 - any defect of untrusted bytes is a corrupt file, never a crash
            raise FileFormatError(f"{path}: corrupt or truncated {what} (not a .npy array written by numpy): "
                                  f"{type(exc).__name__}: {exc}") from None


class NpzEntries:
    """The entries of one ``.npz`` file with checked accessors; every error names the file and the entry.

    Attributes
    ----------
    path : str
    what : str
        What the file should be ("network file", "training checkpoint", ...).
    names : set of str
    """

    def __init__(self, path, what, arrays):
        self.path, self.what, self._arrays = path, what, arrays
        self.names = set(arrays)

    def __contains__(self, name):
        return name in self._arrays

    def error(self, message, name=None):
        """A :class:`FileFormatError` ``"PATH: entry 'NAME' MESSAGE"`` (or ``"PATH: MESSAGE"``)."""
        where = f"entry {name!r} " if name is not None else ""
        return FileFormatError(f"{self.path}: {where}{message}")

    def require(self, names):
        """Raise when any of ``names`` is missing."""
        missing = sorted(set(names) - self.names)
        if missing:
            raise self.error(f"is not a complete {self.what}: missing entries {missing}")

    def ignore_others(self, known):
        """Warn once, naming them, about the entries not in ``known``: they are never read, so they
        cannot harm (a user may store final weights beside a record); they were checked as plain
        arrays (no pickle, sizes within the file) when the archive was read."""
        extra = sorted(self.names - set(known))
        if extra:
            warnings.warn(f"{self.path}: ignoring entries {extra} that a sheaflinalg {self.what} does not "
                          "hold (they are not read)", UnreadEntriesWarning, stacklevel=3)

    def raw(self, name):
        """The entry as read (no checks beyond the archive's)."""
        self.require([name])
        return self._arrays[name]

    def float_array(self, name, shape=None, ndim=None, finite=True):
        """Entry ``name`` as a C-contiguous float64 array, checked.

        Parameters
        ----------
        shape : tuple, optional
            Required shape; an entry ``None`` accepts any length on that axis.
        ndim : int, optional
            Required number of dimensions (implied by ``shape``).
        finite : bool
            Refuse NaN and infinities.
        """
        a = self.raw(name)
        if a.dtype.kind != "f" or a.dtype.itemsize != 8:
            raise self.error(f"must hold float64 numbers, got dtype {a.dtype}", name)
        ndim = len(shape) if shape is not None else ndim
        if ndim is not None and a.ndim != ndim:
            raise self.error(f"must be {ndim}-D{_shape_text(shape)}, got shape {a.shape}", name)
        if shape is not None and any(want is not None and got != want for got, want in zip(a.shape, shape)):
            raise self.error(f"must have shape {_shape_text(shape)[1:]}, got {a.shape}", name)
        if finite and not np.all(np.isfinite(a)):
            raise self.error("holds NaN or infinite values", name)
        return np.ascontiguousarray(a, dtype=np.float64)

    def text(self, name):
        """Entry ``name`` as a Python string (a 0-D unicode array)."""
        a = self.raw(name)
        if a.dtype.kind != "U" or a.shape != ():
            raise self.error(f"must be a text scalar, got dtype {a.dtype} and shape {a.shape}", name)
        return str(a[()])

    def json(self, name):
        """Entry ``name`` decoded as a JSON object (dict)."""
        try:
            value = json.loads(self.text(name))
        except (json.JSONDecodeError, RecursionError) as exc:
            raise self.error(f"is not valid JSON ({exc})", name) from None
        if not isinstance(value, dict):
            raise self.error(f"must be a JSON object, got {type(value).__name__}", name)
        return value


def _shape_text(shape):
    if shape is None:
        return ""
    return " (" + ", ".join("n" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
