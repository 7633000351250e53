"""Where the samples of a batch sit in a value of an exported program (ATen or ONNX).

Both exporters move the batch axis inside a model's values; both importers track it with :class:`Layout`
(ONNX dimensions read the same way as ATen ones below).  ``torch.export`` records a model on one batch of
:data:`~.torch_fx.BATCH` samples, and its ATen graph moves
the batch axis around: ``nn.MultiheadAttention`` works on ``(sequence, batch, width)`` values, merges the
batch with the heads (``(batch * heads, sequence, d)``), Hugging Face's ``Conv1D`` multiplies the
``(batch * sequence, width)`` rows.  A value computed from the input holds the samples as one ATen dimension
``dim`` whose index is ``(o * batch + s) * inner + i`` for sample ``s``: :class:`Layout` ``(dim, outer,
inner)``.  Read flat (row-major), such a value is ``(A, batch, K)`` with sample ``s`` the middle index, so a
view keeps the samples where they are (:func:`from_flat`), and a sample's own value, the per-sample array a
graph node holds, is the ATen shape with ``dim`` replaced by ``(outer, inner)`` (extents of 1 dropped).
The usual layout, the batch first and alone, is :data:`STANDARD`.
"""

import math
from typing import NamedTuple

import numpy as np

from .builder import refuse


class Layout(NamedTuple):
    """The batch of a value: ATen dimension ``dim`` holds ``outer * batch * inner`` entries, sample-major in
    the middle.

    Examples
    --------
    >>> Layout(0, 17, 1).per_sample((34, 32)), STANDARD.per_sample((2, 3, 4))
    ((17, 32), (3, 4))
    >>> Layout(1, 1, 2).slots(3)
    [[0], [1], [2]]
    """

    dim: int
    outer: int
    inner: int

    def extents(self):
        """The per-sample extents the batch dimension keeps (``outer``, ``inner`` when above 1)."""
        return [n for n in (self.outer, self.inner) if n > 1]

    def per_sample(self, shape):
        """A sample's shape within a value of ATen ``shape``."""
        shape = tuple(int(n) for n in shape)
        return shape[:self.dim] + tuple(self.extents()) + shape[self.dim + 1:]

    def slots(self, ndim):
        """``[per-sample axes of ATen dim d for d in range(ndim)]`` (the batch dim: its kept extents)."""
        kept = len(self.extents())
        return [[d] if d < self.dim else list(range(d, d + kept)) if d == self.dim else [d - 1 + kept]
                for d in range(ndim)]

    def flat(self, shape):
        """``(A, K)``: the value read flat is ``(A, batch, K)``."""
        return (math.prod(shape[:self.dim]) * self.outer, self.inner * math.prod(shape[self.dim + 1:]))

    def full(self, per_sample, batch):
        """The ATen shape of a value of per-sample shape ``per_sample`` at ``batch`` samples (of
        :meth:`per_sample` the inverse).

        Examples
        --------
        >>> Layout(1, 1, 2).full((5, 2, 4), 3), STANDARD.full((5,), 3)
        ((5, 6, 4), (3, 5))
        """
        kept = len(self.extents())
        per_sample = tuple(int(n) for n in per_sample)
        return per_sample[:self.dim] + (self.outer * batch * self.inner,) + per_sample[self.dim + kept:]

    def samples(self, value, batch):
        """The value's samples as rows, ``(batch, per-sample size)``: what graph nodes hold."""
        A, K = self.flat(value.shape)
        return np.asarray(value).reshape(A, batch, K).swapaxes(0, 1).reshape(batch, -1)


#: The batch first and alone: ``(batch, *per-sample shape)``.
STANDARD = Layout(0, 1, 1)


def from_flat(shape, A, K, batch):
    """The layout of a value of ATen ``shape`` that reads flat as ``(A, batch, K)``, or None where no one
    dimension holds the samples (a view splitting or mixing them).

    Examples
    --------
    >>> from_flat((34, 32), 17, 32, 2), from_flat((17, 2, 32), 17, 32, 2)
    (Layout(dim=0, outer=17, inner=1), Layout(dim=1, outer=1, inner=1))
    """
    for dim, n in enumerate(shape):
        pre, post = math.prod(shape[:dim]), math.prod(shape[dim + 1:])
        if A % pre == 0 and K % post == 0 and (A // pre) * batch * (K // post) == n:
            return Layout(dim, A // pre, K // post)
    return None


def axis(layout, name, op, d, ndim):
    """The per-sample axis of ATen dim ``d`` (negative from the end) of a rank-``ndim`` value; a refusal where
    ``d`` is not a dimension or is the one holding the samples."""
    if not isinstance(d, int) or isinstance(d, bool) or not -ndim <= d < ndim:
        raise refuse(name, op, f"dim {d!r} is not a dimension of these rank-{ndim} values")
    slot = layout.slots(ndim)[d % ndim]
    if d % ndim == layout.dim:
        raise refuse(name, op, f"dim {d} holds the samples of the batch; acting along it mixes them (every "
                               "operation must act on each sample separately)")
    return slot[0]


def without(layout, dims, ndim):
    """The layout after dropping the ATen dims ``dims`` (none of them the batch's) of a rank-``ndim`` value."""
    return Layout(layout.dim - sum(1 for d in dims if d % ndim < layout.dim), layout.outer, layout.inner)


def permuted(layout, dims):
    """``(layout of x.permute(dims), per-sample axes)`` of a value of ``layout``."""
    slots = layout.slots(len(dims))
    return (Layout(list(dims).index(layout.dim), layout.outer, layout.inner),
            tuple(a for d in dims for a in slots[d]))


def constant_sample(name, op, value, shape, layout, batch):
    """A constant broadcast against a value of ATen ``shape`` and ``layout``, as one sample's array (per-sample
    shape, or ``(1,)`` for a single number); refusal where it differs between the samples.

    Examples
    --------
    >>> constant_sample("a", "add", np.arange(4.0).reshape(1, 4), (2, 4), STANDARD, 2)
    array([0., 1., 2., 3.])
    """
    value = np.asarray(value, dtype=np.float64)
    if value.size == 1:
        return value.reshape(1)
    try:
        full = np.broadcast_to(value, shape)
    except ValueError:
        raise refuse(name, op, f"its constant of shape {value.shape} does not broadcast to the value's shape "
                               f"{tuple(shape)}") from None
    rows = layout.samples(full, batch)
    if not np.all(rows == rows[:1]):
        raise refuse(name, op, f"its constant of shape {value.shape} differs between the samples of the batch")
    return rows[0].reshape(layout.per_sample(shape))
