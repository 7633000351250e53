"""Reading the small JSON records the package writes for itself (resume markers, cached runs).

Such a file may have been edited, truncated by hand or written by another program: it is read
through :func:`load_record`, which checks that it is a JSON object holding every expected key with
a value of the expected kind, and otherwise raises one :class:`~sheaflinalg._common.npzfile.FileFormatError`
naming the file, the key and how to start over, before anything is computed from it.
"""

import json
import numbers

from .npzfile import FileFormatError

#: Kinds of values a record may hold, by the name a message gives them.
KINDS = {"a string": str, "a number": numbers.Real, "a list": list, "an object": dict,
         "a number or null": (numbers.Real, type(None))}


def _kind_ok(value, kind):
    return isinstance(value, KINDS[kind]) and not isinstance(value, bool)


def load_record(path, fields, start_over):
    """The JSON object of ``path``, checked to hold ``fields``.

    Parameters
    ----------
    path : str
    fields : dict
        ``{key: kind}``, ``kind`` a key of :data:`KINDS` (``"a number"``: a real number, never a bool).
    start_over : str
        How to do without the file (``"delete it to compute that run again"``), ending every message.

    Returns
    -------
    dict

    Raises
    ------
    FileFormatError
        ``path`` cannot be read, is not JSON, is not an object, lacks a key or holds a value of
        another kind.
    OSError
        Only ``FileNotFoundError``: the caller decides what a missing record means.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "marker.json")
    >>> with open(path, "w") as f:
    ...     _ = f.write('{"seconds": 1.5}')
    >>> load_record(path, {"seconds": "a number"}, "delete it")
    {'seconds': 1.5}
    >>> load_record(path, {"seconds": "a number", "notes": "a string"}, "delete it")
    Traceback (most recent call last):
    ...
    sheaflinalg._common.npzfile.FileFormatError: ...marker.json: lacks the key 'notes' (edited, or written by another program); delete it
    """
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise FileFormatError(f"{path}: cannot be read ({exc.strerror or exc}); {start_over}") from None
    except ValueError as exc:        # JSONDecodeError, UnicodeDecodeError
        raise FileFormatError(f"{path}: not a JSON file of this package ({exc}); {start_over}") from None
    if not isinstance(record, dict):
        raise FileFormatError(f"{path}: holds a JSON {type(record).__name__}, not an object; {start_over}")
    for key, kind in fields.items():
        if key not in record:
            raise FileFormatError(f"{path}: lacks the key {key!r} (edited, or written by another program); "
                                  f"{start_over}")
        if not _kind_ok(record[key], kind):
            value = repr(record[key])
            raise FileFormatError(f"{path}: {key!r} must be {kind}, got {value[:60]}; {start_over}")
    return record
