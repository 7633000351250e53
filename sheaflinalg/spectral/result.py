"""The result object of the spectral drivers: eigenpairs, block energies, statistics."""

from dataclasses import dataclass, field

import numpy as np

from .._common.validation import check_choice, did_you_mean
from ..sheaf.layout import Layout


def fix_signs(V):
    """Sign eigenvectors (..., N) so that the entry of largest magnitude is positive."""
    idx = np.argmax(np.abs(V), axis=-1)
    s = np.sign(np.take_along_axis(V, idx[..., None], axis=-1))
    s[s == 0] = 1.0
    return V * s


def _stats(values):
    v = np.asarray(values, dtype=np.float64)
    q25, med, q75 = np.percentile(v, [25, 50, 75])
    return {"median": float(med), "q25": float(q25), "q75": float(q75), "iqr": float(q75 - q25),
            "mean": float(v.mean()), "std": float(v.std()), "min": float(v.min()), "max": float(v.max())}


@dataclass
class SpectrumResult:
    """Result of :func:`spectrum`: per-sample extreme eigenpairs of ``L[Omega, Omega]``.

    Attributes
    ----------
    smallest : ndarray, shape (n_samples, k)
        The ``k`` smallest eigenvalues, ascending (``smallest[:, 0]`` is ``lambda_1``).
    largest : ndarray, shape (n_samples, k)
        The ``k`` largest eigenvalues, descending.
    vectors_smallest, vectors_largest : ndarray, shape (n_samples, k, N) or None
        Unit eigenvectors (free order of :attr:`layout`), signed so that the
        entry of largest magnitude is positive.
    eigenvalues : ndarray, shape (n_samples, N) or None
        The whole spectrum, ascending (``full=True``, dense method only).
    residuals : ndarray, shape (n_samples, 2)
        Largest relative residual ``||L v - lambda v|| / lambda`` of the
        smallest / largest eigenpairs (zeros when ``vectors=False`` on the
        dense path; for the largest of a large graph network without vectors, the
        Lanczos recurrence's Ritz estimate of it, at most ``tol``).
    layout : Layout or None
        Block layout of the eigenvectors (``None`` for a generic system).
    blocks : list of (str, slice or index array)
        Named blocks the energies are reported on (for a pinned system, the
        layout's blocks without the pinned coordinates).
    method : str
        ``"dense"``, ``"arpack"`` (substitution), ``"windows"`` (``lambda_max`` by windows, see
        :mod:`~sheaflinalg.spectral.windowed`), ``"cholmod"`` or ``"superlu"``.
    system : str
    n_operator : int
        Operator applications used by ARPACK, summed over the samples.
    n_distinct : int
        Number of distinct Laplacians diagonalised: samples with the same
        activation pattern share ``L[Omega, Omega]`` (reduced system, or any
        system with identity output), which is computed once.
    path : str
        Which engine ran: ``"chain"`` (the fused chain kernels) or ``"graph"``;
        (:func:`~sheaflinalg.network.paths.engine`; None for a
        system without a network).
    windows : list of WindowReport or None
        ``method="windows"``: per distinct system, what the windows did and what ``lambda_max`` is
        guaranteed to be (:class:`~sheaflinalg.spectral.windowed.WindowReport`).
    """

    smallest: np.ndarray
    largest: np.ndarray
    vectors_smallest: np.ndarray = None
    vectors_largest: np.ndarray = None
    eigenvalues: np.ndarray = None
    residuals: np.ndarray = None
    layout: Layout = None
    blocks: list = field(default_factory=list)
    method: str = ""
    system: str = "reduced"
    n_operator: int = 0
    n_distinct: int = 0
    path: str = None
    windows: list = None

    @property
    def lambda_min(self):
        """Smallest eigenvalue ``lambda_1`` per sample (the spectral gap)."""
        return self.smallest[:, 0]

    @property
    def lambda_max(self):
        """Largest eigenvalue per sample."""
        return self.largest[:, 0]

    @property
    def condition(self):
        """Condition number ``lambda_max / lambda_min`` per sample."""
        return self.lambda_max / self.lambda_min

    @property
    def n_samples(self):
        return self.smallest.shape[0]

    @property
    def block_names(self):
        """Names of the blocks of :meth:`block_energy` (``z1, a1, ..., z(k+1)[, yhat]``)."""
        return [name for name, _ in self.blocks]

    def _vectors(self, which, index):
        check_choice(which, ("smallest", "largest"), "which")
        V = self.vectors_smallest if which == "smallest" else self.vectors_largest
        if V is None:
            raise ValueError("eigenvectors were not computed: call spectrum(..., vectors=True)")
        if not 0 <= index < V.shape[1]:
            raise ValueError(f"index {index} out of range: {V.shape[1]} eigenvectors were computed")
        return V[:, index, :]

    def block_energy(self, which="smallest", index=0):
        """Energy ``||v_b||^2`` of eigenvector ``index`` on every block, per sample.

        Returns
        -------
        ndarray, shape (n_samples, n_blocks)
            Rows sum to 1 (unit eigenvectors); columns follow :attr:`block_names`.

        Examples
        --------
        >>> import numpy as np, sheaflinalg as sl
        >>> sp = sl.spectrum(sl.Network.random([2, 6, 1], seed=0), np.ones((3, 2)))
        >>> np.round(sp.block_energy().sum(axis=1), 12)
        array([1., 1., 1.])
        """
        V = self._vectors(which, index)
        return np.stack([np.sum(V[:, s] ** 2, axis=1) for _, s in self.blocks], axis=1)

    def dominant_block(self, which="smallest", index=0):
        """Name of the block with the largest mean energy over the samples."""
        return self.block_names[int(np.argmax(self.block_energy(which, index).mean(axis=0)))]

    def neuron_contributions(self, which="smallest", index=0, block=None):
        """Share of each neuron of ``block`` (default: the dominant block) in the block's energy.

        Returns
        -------
        name : str
        ndarray, shape (n_samples, block size)
            ``v_j^2 / ||v_block||^2``; rows sum to 1 (0 where the block has no energy).
        """
        V = self._vectors(which, index)
        name = self.dominant_block(which, index) if block is None else block
        part = V[:, self._block(name)] ** 2
        total = part.sum(axis=1, keepdims=True)
        return name, np.divide(part, total, out=np.zeros_like(part), where=total > 0)

    def _block(self, name):
        """The coordinates (slice or index array) of block ``name``, or a ValueError naming the closest."""
        table = dict(self.blocks)
        if name not in table:
            raise ValueError(f"no block {name!r}; {did_you_mean(name, table)}")
        return table[name]

    def node_shape(self, name):
        """Shape of block ``name``'s part of an eigenvector: a graph node's own shape (``(C, L)``,
        ``(C, H, W)``, ``(n,)``), else (a chain's blocks, pinned systems) ``(size,)``."""
        idx = self._block(name)
        size = idx.stop - idx.start if isinstance(idx, slice) else len(idx)     # layout slices: explicit bounds
        graph = getattr(self.layout, "graph", None)
        if graph is not None and name in graph.shapes and int(np.prod(graph.shapes[name])) == size:
            return tuple(graph.shapes[name])
        return (size,)

    def node_vector(self, name, which="smallest", sample=0, index=0):
        """Block ``name`` of eigenvector ``index`` of input ``sample``, in the node's own shape.

        For a graph network, a convolution's part of the Fiedler vector is a
        ``(C, L)`` or ``(C, H, W)`` feature map.

        Examples
        --------
        >>> import numpy as np, sheaflinalg as sl
        >>> W = np.random.default_rng(0).normal(size=(3, 2, 2, 2))
        >>> conv = sl.Node("conv", "conv", ["x"], {"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
        ...                {"weight": W, "bias": np.zeros(3)})
        >>> net = sl.Network.from_nodes((2, 4, 4), [conv, sl.Node("relu", "relu", ["conv"])])
        >>> sp = sl.spectrum(net, np.ones((1, 32)), progress=False)
        >>> sp.node_vector("relu").shape, sp.channel_energy()["relu"].shape
        ((3, 3, 3), (1, 3))
        """
        V = self._vectors(which, index)
        if isinstance(sample, bool) or not isinstance(sample, (int, np.integer)) or not 0 <= sample < V.shape[0]:
            raise ValueError(f"sample must be an integer in [0, {V.shape[0]}), got {sample!r}")
        return V[sample, self._block(name)].reshape(self.node_shape(name))

    def channel_energy(self, which="smallest", index=0):
        """Energy of eigenvector ``index`` on every channel of every block, per sample.

        A channel is an index along the first axis of the block's shape
        (:meth:`node_shape`): a feature map's channel, a linear layer's neuron.

        Returns
        -------
        dict
            ``{block name: ndarray (n_samples, n_channels)}``, in the order of
            :attr:`block_names`; summed over the channels, the :meth:`block_energy`.
        """
        V = self._vectors(which, index)
        return {name: (V[:, idx] ** 2).reshape(V.shape[0], self.node_shape(name)[0], -1).sum(axis=2)
                for name, idx in self.blocks}

    def stability(self, which="smallest", index=0):
        """Mean ``|cos|`` between the eigenvectors of every pair of distinct samples (1.0 for one sample)."""
        V = self._vectors(which, index)
        if V.shape[0] < 2:
            return 1.0
        C = np.abs(V @ V.T)
        m = V.shape[0]
        return float((C.sum() - np.trace(C)) / (m * (m - 1)))

    def summary(self):
        """Statistics over the samples: ``{quantity: {median, q25, q75, iqr, mean, std, min, max}}``."""
        return {"lambda_min": _stats(self.lambda_min), "lambda_max": _stats(self.lambda_max),
                "condition": _stats(self.condition)}

    def table(self):
        """A plain-text table of :meth:`summary` (and the eigenvector diagnostics when available)."""
        lines = [f"{'quantity':<12}{'median':>12}{'q25':>12}{'q75':>12}{'std':>12}{'min':>12}{'max':>12}"]
        for name, st in self.summary().items():
            lines.append(f"{name:<12}" + "".join(f"{st[c]:>12.5g}" for c in
                                                 ("median", "q25", "q75", "std", "min", "max")))
        if self.vectors_smallest is not None and getattr(self.layout, "is_graph", False):
            lines += ["", self.node_table()]
        elif self.vectors_smallest is not None:
            lines.append("")
            lines.append(f"{'energy':<12}" + "".join(f"{b:>9}" for b in self.block_names))
            for which, label in (("smallest", "lambda_min"), ("largest", "lambda_max")):
                E = self.block_energy(which).mean(axis=0)
                lines.append(f"{label:<12}" + "".join(f"{e:>9.3f}" for e in E))
            lines.append("")
            lines.append(f"eigenvector stability (mean |cos| over sample pairs): "
                         f"lambda_min {self.stability('smallest'):.4f}, "
                         f"lambda_max {self.stability('largest'):.4f}")
        return "\n".join(lines)

    def node_table(self):
        """A plain-text table with one row per block (a graph network: per node): its op, shape, the mean
        energy of the ``lambda_min`` eigenvector on it, its channel of largest mean energy and that
        channel's share of the block's energy, and the mean energy of the ``lambda_max`` eigenvector."""
        graph = getattr(self.layout, "graph", None)
        ops = {node.name: node.op for node in graph.nodes} if graph is not None else {}
        E_min, E_max = self.block_energy("smallest").mean(axis=0), self.block_energy("largest").mean(axis=0)
        channels = self.channel_energy("smallest")
        width = max(12, *(len(b) + 2 for b in self.block_names))
        lines = [f"{'node':<{width}}{'op':<18}{'shape':<16}{'E(l_min)':>10}{'channel':>9}{'share':>8}{'E(l_max)':>10}"]
        for b, e_min, e_max in zip(self.block_names, E_min, E_max):
            per = channels[b].mean(axis=0)
            top = int(np.argmax(per))
            share = per[top] / per.sum() if per.sum() > 0 else 0.0
            shape = str(self.node_shape(b)).replace(" ", "")
            lines.append(f"{b:<{width}}{ops.get(b, 'output' if b == 'yhat' else '-'):<18}{shape:<16}"
                         f"{e_min:>10.4f}{top:>9}{share:>8.3f}{e_max:>10.4f}")
        return "\n".join(lines)

    def __repr__(self):
        s = self.summary()
        return (f"SpectrumResult(n_samples={self.n_samples}, method={self.method!r}, "
                f"lambda_min median={s['lambda_min']['median']:.4g}, "
                f"lambda_max median={s['lambda_max']['median']:.4g}, "
                f"condition median={s['condition']['median']:.4g})")
