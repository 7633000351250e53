"""The package's own data files: the paper's recorded inputs and the shipped sweep specifications.

They live in ``sheaflinalg/data/`` and are found with :mod:`importlib.resources`, so that an
installed wheel reads them wherever it is installed (never relative to the source tree):

- ``data/table_e1/NAME.npz``: the inputs and curves of the paper's Table E.1;
- ``data/paper_sweeps/NAME.npz``: the recorded inputs of the paper's two sweeps;
- ``data/spectral_gap_depth.npz``: the networks and inputs of the spectral-gap-vs-depth table;
- ``data/sweeps/NAME.toml``: sweep specifications, named on the command line by ``NAME`` alone
  (``sheaflinalg sweep run quick``).
"""

import difflib
import os
import re
from importlib import resources
from pathlib import Path

PACKAGE = "sheaflinalg"
SPEC_FOLDER = "sweeps"
_NAME = re.compile(r"[A-Za-z0-9_-]+")


def data_path(*parts):
    """The file-system path of ``sheaflinalg/data/PARTS`` (a file or a folder of the package data).

    Raises
    ------
    FileNotFoundError
        The installed package lacks it (an incomplete installation), naming what is missing.
    RuntimeError
        The package is imported from an archive (zip), whose data have no file-system path.

    Examples
    --------
    >>> data_path("table_e1", "paraboloid_1H.npz").name
    'paraboloid_1H.npz'
    >>> data_path("table_e1", "nope.npz")
    Traceback (most recent call last):
    ...
    FileNotFoundError: package data file data/table_e1/nope.npz is missing from this installation of sheaflinalg; reinstall it
    """
    res = resources.files(PACKAGE).joinpath("data")
    for part in parts:
        res = res.joinpath(part)
    if not isinstance(res, os.PathLike):
        raise RuntimeError(f"{PACKAGE} is imported from an archive; install it as files (pip install) "
                           f"to read its data")
    path = Path(res)
    if not path.exists():
        raise FileNotFoundError(f"package data file data/{'/'.join(parts)} is missing from this installation "
                                f"of {PACKAGE}; reinstall it")
    return path


def data_names(folder, suffix):
    """Sorted names (without ``suffix``) of the files ending in ``suffix`` in ``sheaflinalg/data/FOLDER``.

    Examples
    --------
    >>> data_names("sweeps", ".toml")[:2]
    ['beta_scaling', 'beta_scaling_batch']
    """
    return sorted(p.name[:-len(suffix)] for p in data_path(folder).iterdir() if p.name.endswith(suffix))


def shipped_spec(spec):
    """Resolve a sweep specification argument: a shipped spec's bare name becomes its path.

    An existing file, a dict or TOML text is returned unchanged (a file in the working directory
    wins over a shipped spec of the same name).  A bare name (letters, digits, ``_``, ``-``) that is
    neither a file nor a shipped spec is refused with the shipped names.

    Examples
    --------
    >>> shipped_spec("quick").name
    'quick.toml'
    >>> shipped_spec("quik")
    Traceback (most recent call last):
    ...
    ValueError: no sweep specification 'quik': not a file, nor a shipped spec; did you mean 'quick'? (shipped: beta_scaling, beta_scaling_batch, integration_time, quick)
    """
    if not isinstance(spec, str) or os.path.exists(spec) or not _NAME.fullmatch(spec):
        return spec
    names = data_names(SPEC_FOLDER, ".toml")
    if spec in names:
        return data_path(SPEC_FOLDER, f"{spec}.toml")
    close = difflib.get_close_matches(spec, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"no sweep specification {spec!r}: not a file, nor a shipped spec{hint} "
                     f"(shipped: {', '.join(names)})")
