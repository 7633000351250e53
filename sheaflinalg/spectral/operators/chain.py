"""``delta_Omega`` of one sample as an operator: products and block substitutions, no matrix.

The Laplacian ``L = delta^T delta`` and its inverse
``L^{-1} = delta^{-1} delta^{-T}`` are applied with the compiled sweeps of
:mod:`sheaflinalg.kernels.substitution` and the sample's activation masks.
"""

import threading
import time

import numba
import numpy as np
from numba.typed import List

from ..._common import threads as _threads
from ...kernels import substitution as _sub
from ...sheaf.layout import Layout



# ---------------------------------------------------------------- operators
class CoboundaryOperator:
    """``delta_Omega`` of one sample as products and substitutions (no matrix).

    Parameters
    ----------
    net : Network
    mask : sequence of ndarray
        This sample's hidden-layer masks (``True`` = active).
    jacobian : ndarray or None
        Linearised output map ``J`` (1-D diagonal or 2-D); ``None`` for the
        reduced system.
    weights : numba.typed.List, optional
        :func:`typed_weights` of ``net``, when the caller already has them.
    threads : int
        Threads of the kernels (see :meth:`apply_pair`); any positive integer.

    Examples
    --------
    >>> import numpy as np, sheaflinalg as sl
    >>> net = sl.Network.random([2, 4, 1], seed=0)
    >>> op = CoboundaryOperator(net, net.activation_pattern(np.array([1.0, 0.5])))
    >>> v = np.arange(op.n, dtype=float)
    >>> bool(np.allclose(op.laplacian_solve(op.laplacian_matvec(v)), v))
    True
    """

    def __init__(self, net, mask, jacobian=None, weights=None, threads=1):
        reduced = jacobian is None
        self.threads = threads
        self.layout = Layout.for_network(net, reduced=reduced)
        off = self.layout.kernel_offsets()
        self.n = self.layout.n_free
        self._dims, self._zoff, self._aoff = off.dims, off.zoff, off.aoff
        self._yhat = off.yhat_off
        self._weights = typed_weights(net) if weights is None else weights
        m = np.zeros(self.n)
        for l, ml in enumerate(mask, start=1):
            m[self.layout.free(self.layout.z(l))] = ml
        self._mask = m
        n_out = net.dims[-1]
        if jacobian is None:
            J = np.zeros((n_out, n_out))
        else:
            J = np.asarray(jacobian, dtype=np.float64)
            J = np.diag(J) if J.ndim == 1 else np.ascontiguousarray(J)
        self._J = J
        self._width = max(net.dims[1:-1], default=1)
        #: Entries per row block of a weight matrix (:func:`~sheaflinalg.kernels.substitution.row_blocks`).
        self.block_entries = _sub.BLOCK_ENTRIES
        self._shapes = [W.shape for W in net.weights[1:]]
        self.n_matvec = 0
        self.n_solve = 0
        self._count_lock = threading.Lock()

    @property
    def splits(self):
        """Whether some weight matrix has several row blocks for the threads to share."""
        return self.threads > 1 and any(_sub.row_blocks.py_func(m, n, self.block_entries) > 1
                                        for m, n in self._shapes)

    def _args(self):
        return (self._weights, self._dims, self._zoff, self._aoff, self._mask, self._J, self._yhat)

    def _count(self, name):
        with self._count_lock:
            setattr(self, name, getattr(self, name) + 1)

    def apply_pair(self, a, b):
        """``y = L x`` for request ``a = (x, y)`` and ``y = L^{-1} x`` for request ``b``.

        Either request may be ``None`` (skipped); the two share their passes
        over the weights (the protocol of
        :func:`sheaflinalg.spectral.arpack_pair.largest_pair`).  Every ``x`` and ``y``
        is a contiguous float64 vector of length ``n``.  With ``threads > 1``
        the row blocks of every big weight matrix are shared among the
        threads when that is faster: no more threads than the cores other
        runnable tasks leave free (:func:`~sheaflinalg._common.threads.usable_threads`),
        and serial and parallel calls are timed and the faster runs
        (:class:`~sheaflinalg._common.threads.SerialOrParallel`);
        the results are the same bit for bit either way (see
        :mod:`sheaflinalg.kernels.substitution`).
        """
        empty = np.empty(0)
        v, Lv = self._request(a, "n_matvec") if a is not None else (empty, empty)
        w, Linv = self._request(b, "n_solve") if b is not None else (empty, empty)
        # fresh scratch per call (cheap): the operator may be used from several threads
        dv, y = np.empty(self.n), np.empty(self.n)
        threads = _threads.usable_threads(self.threads) if self.splits else 1
        if threads == 1 or not _threads.parallel_allowed():
            self._sweeps(_sub.backward_sweep, _sub.forward_sweep, v, Lv, dv, w, Linv, y)
            return
        choice = _threads.serial_or_parallel((self.n, threads, v.size > 0, w.size > 0, self.block_entries))
        parallel = choice.choose()
        start = time.perf_counter()
        if parallel:
            with _threads.PARALLEL_LOCK:
                numba.set_num_threads(_threads.numba_threads(threads))
                self._sweeps(_sub.backward_sweep_parallel, _sub.forward_sweep_parallel, v, Lv, dv, w, Linv, y)
            _threads.parallel_done(threads)
        else:
            self._sweeps(_sub.backward_sweep, _sub.forward_sweep, v, Lv, dv, w, Linv, y)
        choice.record(parallel, time.perf_counter() - start)

    def _request(self, request, counter):
        # the kernels do not check bounds: a wrong vector must not reach them
        x, y = request
        for arr in (x, y):
            if not (isinstance(arr, np.ndarray) and arr.dtype == np.float64 and arr.shape == (self.n,)
                    and arr.flags.c_contiguous):
                raise ValueError(f"apply_pair needs contiguous float64 vectors of length {self.n}")
        if not y.flags.writeable:
            raise ValueError("apply_pair: the output vector is read-only")
        self._count(counter)
        return x, y

    def _sweeps(self, backward, forward, v, Lv, dv, w, Linv, y):
        """The backward sweep (``L v``, ``y = delta^{-T} w``), then ``Linv = delta^{-1} y``."""
        P, Q = self._partials()
        backward(*self._args(), v, Lv, dv, w, y, P, Q, self.block_entries)
        if w.size:
            forward(*self._args(), y, Linv, self.block_entries)

    def _partials(self):
        """Scratch for the row blocks' partial sums of the ``W^T`` products."""
        return np.empty((_sub.MAX_BLOCKS, self._width)), np.empty((_sub.MAX_BLOCKS, self._width))

    def _vector(self, v):
        v = np.ascontiguousarray(v, dtype=np.float64).reshape(-1)
        if v.size != self.n:
            raise ValueError(f"expected a vector of length {self.n}, got {v.size}")
        return v

    def laplacian_matvec(self, v):
        """``delta^T (delta v)``."""
        out = np.empty(self.n)
        self.apply_pair((self._vector(v), out), None)
        return out

    def laplacian_solve(self, v):
        """``L^{-1} v = delta^{-1} (delta^{-T} v)`` (two block substitutions)."""
        out = np.empty(self.n)
        self.apply_pair(None, (self._vector(v), out))
        return out

    def solve(self, w):
        """``delta^{-1} w`` (block forward substitution)."""
        out = np.empty(self.n)
        _sub.forward_sweep(*self._args(), self._vector(w), out, self.block_entries)
        return out

    def solve_transpose(self, v):
        """``delta^{-T} v`` (block backward substitution)."""
        out, empty = np.empty(self.n), np.empty(0)
        P, Q = self._partials()
        _sub.backward_sweep(*self._args(), empty, empty, empty, self._vector(v), out, P, Q, self.block_entries)
        return out


def typed_weights(net):
    """The network's weight matrices as a ``numba.typed.List`` (views, no copy)."""
    # The network's private storage: the public arrays are read-only views, a type the
    # compiled kernels were not built for; the kernels only read them.
    return List([np.ascontiguousarray(W) for W in net._weights])
