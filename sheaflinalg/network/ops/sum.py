"""``sum``: the sum over some per-sample axes (``Tensor.sum``/``torch.sum`` with ``dim``, ONNX ``ReduceSum``)."""

from .reduction import Reduction


class Sum(Reduction):
    """Every output is the sum of a disjoint group of ``count`` parent entries (entries 1,
    ``||F||_2 = sqrt(count)``).

    Examples
    --------
    >>> import sheaflinalg as sl
    >>> node = sl.Node("s", "sum", ["x"], {"axes": (0,), "keepdim": True})
    >>> RULE.shape(node, [(3, 4, 5)])
    (1, 4, 5)
    """

    name = "sum"

    def weight(self, count):
        return 1.0


RULE = Sum()
