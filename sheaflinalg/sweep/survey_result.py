"""The rows of a survey as arrays (:class:`SurveyResult`), read from its sweep store."""

from dataclasses import dataclass, field

import numpy as np

from .._common.validation import check_path
from .store import Store, StoreError

#: The per-input values :meth:`SurveyResult.groups` can group (one number per input).
VALUES = ("lambda_min", "lambda_max", "condition", "discord_total")


@dataclass
class SurveyResult:
    """The finished inputs of a survey (:func:`sheaflinalg.survey`), one entry per input, in input order.

    Attributes
    ----------
    name : str
    index, labels, predicted : ndarray of int, shape (n,)
        The inputs' rows in ``X``, true classes (-1 without labels) and the network's answers.
    correct : ndarray of bool, shape (n,)
    lambda_min, lambda_max, condition : ndarray, shape (n,)
        NaN where the spectrum was not computed.
    nodes : list of str
        Columns of ``energy``: the blocks of the reduced system (a graph network's nodes).
    energy : ndarray, shape (n, len(nodes))
        Energy of the ``lambda_min`` eigenvector on every node (rows sum to 1).
    edges : list of str
        Columns of ``discord``: each node's defining edge.
    discord : ndarray, shape (n, len(edges))
        Pinned discord ``1/2 ||r_e||^2`` per edge (NaN where it was not computed).
    discord_total : ndarray, shape (n,)
    settled : ndarray of bool, shape (n,)
        The pinned equilibrium was found.
    sliding : ndarray of int, shape (n,)
        Coordinates of the equilibrium held on a switching surface.
    seconds : ndarray, shape (n,)
        Time of each input's run.
    failed : dict
        ``{input: error}`` of the runs that failed.
    counts : dict or None
        The counts of the call that ran the survey (:func:`sheaflinalg.sweep.run`'s); None when loaded.
    """

    name: str
    index: np.ndarray
    labels: np.ndarray
    predicted: np.ndarray
    correct: np.ndarray
    lambda_min: np.ndarray
    lambda_max: np.ndarray
    condition: np.ndarray
    nodes: list
    energy: np.ndarray
    edges: list
    discord: np.ndarray
    discord_total: np.ndarray
    settled: np.ndarray
    sliding: np.ndarray
    seconds: np.ndarray
    failed: dict = field(default_factory=dict)
    counts: dict = None

    @classmethod
    def load(cls, db, name="survey"):
        """The survey named ``name`` of the store ``db`` (opened read-only; the inputs finished so far).

        Examples
        --------
        >>> import os, tempfile, numpy as np, sheaflinalg as sl
        >>> db = os.path.join(tempfile.mkdtemp(), "s.db")
        >>> _ = sl.survey(sl.Network.random([2, 4, 2], seed=0), np.ones((2, 2)), [0, 1], store=db, progress=False)
        >>> sl.SurveyResult.load(db).labels.tolist()
        [0, 1]
        """
        store = Store(check_path(db, "db"), readonly=True)
        try:
            found = {s["name"]: s["function"] for s in store.sweeps()}
            if found.get(name) != "survey":
                surveys = sorted(n for n, f in found.items() if f == "survey")
                raise StoreError(f"{db}: no survey named {name!r}; it holds "
                                 + (", ".join(map(repr, surveys)) if surveys else "none"))
            rows = store.rows(name)
        finally:
            store.close()
        return cls.from_rows(name, rows)

    @classmethod
    def from_rows(cls, name, rows):
        """The result of the store's rows of one survey (:meth:`Store.rows`)."""
        done = sorted((r for r in rows if r["status"] == "done"), key=lambda r: r["params"]["input"])
        m = [r["metrics"] for r in done]

        def column(key, default=np.nan, dtype=float):
            return np.array([default if x.get(key) is None else x[key] for x in m], dtype=dtype)

        nodes, energy = _table(m, "energy")
        edges, discord = _table(m, "discord")
        labels = [r["params"]["label"] for r in done]
        return cls(name, np.array([r["params"]["input"] for r in done], dtype=np.int64),
                   np.array([-1 if y is None else y for y in labels], dtype=np.int64), column("predicted", -1, np.int64),
                   column("correct", False, bool), column("lambda_min"), column("lambda_max"), column("condition"),
                   nodes, energy, edges, discord, column("discord_total"), column("settled", False, bool),
                   column("sliding", 0, np.int64), column("seconds"),
                   {r["params"]["input"]: r["error"] for r in rows if r["status"] == "failed"})

    def groups(self, value, by="class", only=None):
        """``{group: the values of its inputs}`` of one per-input ``value`` (:data:`VALUES`), by true class
        (``"class"``) or by outcome (``"outcome"``: ``"correct"``, ``"wrong"``); ``only`` (a boolean array, one
        entry per input) keeps the inputs where it is True.

        Examples
        --------
        >>> import os, tempfile, numpy as np, sheaflinalg as sl
        >>> db = os.path.join(tempfile.mkdtemp(), "s.db")
        >>> s = sl.survey(sl.Network.random([2, 4, 2], seed=0), np.ones((2, 2)), [0, 1], store=db, progress=False)
        >>> {k: v.size for k, v in s.groups("lambda_min", by="outcome").items()}
        {'correct': 1, 'wrong': 1}
        """
        if value not in VALUES:
            raise ValueError(f"value must be one of {', '.join(VALUES)}, got {value!r}")
        v = getattr(self, value)
        keep = np.ones(self.n_inputs, dtype=bool) if only is None else np.asarray(only, dtype=bool)
        if keep.shape != v.shape:
            raise ValueError(f"only must have one entry per input ({self.n_inputs}), got shape {keep.shape}")
        if by == "class":
            return {str(c): v[keep & (self.labels == c)] for c in np.unique(self.labels)}
        if by == "outcome":
            return {"correct": v[keep & self.correct], "wrong": v[keep & ~self.correct]}
        raise ValueError(f"by must be 'class' or 'outcome', got {by!r}")

    @property
    def n_inputs(self):
        return self.index.size


def _table(metrics, key):
    """``(names, (n, len(names)) array)`` of the per-node dicts ``metrics[i][key]`` (NaN where missing)."""
    names = []
    for x in metrics:
        names += [n for n in (x.get(key) or {}) if n not in names]
    table = np.full((len(metrics), len(names)), np.nan)
    for i, x in enumerate(metrics):
        for j, n in enumerate(names):
            table[i, j] = (x.get(key) or {}).get(n, np.nan)
    return names, table
