"""``mean``: the average over some per-sample axes (``Tensor.mean`` with ``dim``, ONNX ``ReduceMean``)."""

from .reduction import Reduction


class Mean(Reduction):
    """Every output is the average of a disjoint group of ``count`` parent entries (entries ``1 / count``,
    ``||F||_2 = 1/sqrt(count)``).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> node = sl.Node("m", "mean", ["x"], {"axes": (1, 2), "keepdim": False})
    >>> RULE.shape(node, [(3, 4, 5)])
    (3,)
    """

    name = "mean"

    def weight(self, count):
        return 1.0 / count


RULE = Mean()
