"""The contract between an exact equilibrium and the training loop that steps the weights.

An *equilibrium oracle* belongs to one network family (chains, graph networks).
For weights ``theta`` (the flat parameter vector of the family: ``Network.parameters()``
for a chain, :class:`~sheaflinalg.training.velocity.GraphParameters` order
for a graph) and a mini-batch ``(X, Y)`` it finds, sample by sample, the state
``x*`` minimising ::

    E_b(x; theta) = 1/2 sum over interior edges ||e(x; theta)||^2  +  b * loss(output(x), y)

(``b`` the nudging; the activation pattern read off ``x*`` itself, Filippov
sliding on switching surfaces), and returns ``g = scale * grad_theta E_b(x*; theta) / b``
summed over the batch, ``scale`` the factor of
:func:`~sheaflinalg.training.output_edge.loss_gradient_scale` so that ``g`` estimates the
gradient of the reported mean loss (exact as ``b -> 0``).  With symmetric nudging the
caller averages the oracle's answers at ``+b`` and ``-b``.
"""

from dataclasses import dataclass


@dataclass
class SettleReport:
    """How the equilibria of one mini-batch were found.

    Attributes
    ----------
    iterations : int
        Pattern iterations of the slowest sample (1: the forward pattern was already self-consistent); for a
        smooth graph at small nudging, the steps of :func:`~.smooth.smooth_equilibrium`.
    unsettled : int
        Samples without an equilibrium: their pattern cycled in a way neither the tie decision nor the
        Filippov search resolves, or ran out of the iteration cap (their last iterate is used, and their
        gradient may be off by more than the nudging's order: lower the nudging or raise the cap).  Ties
        of the forward pass decided at small nudging (a max-pool window of equal entries, a pre-activation
        at exactly 0) are not counted.
    sliding : int
        Coordinates held on a switching surface (Filippov) over the batch.
    energy : float
        ``E_b(x*)`` summed over the batch.
    decided : int
        Rectifier coordinates at exactly 0 at the forward pass into which both sides push (a sliding mode
        at the tie) decided inactive without the search, at small nudging (:data:`~.graph.TIES_NUDGING`):
        the gradient is then backpropagation's with ``relu'(0) = 0`` there, one of the generalised
        gradients the sliding mode's lies between.
    """

    iterations: int
    unsettled: int
    sliding: int
    energy: float
    decided: int = 0


class EquilibriumOracle:
    """Interface: ``gradient(theta, X, Y, nudging, out) -> SettleReport``.

    Subclasses are built once per run (network structure, loss, iteration cap) and
    called once per mini-batch; ``out`` (``theta``'s shape) receives ``g``.
    """

    def gradient(self, theta, X, Y, nudging, out):
        raise NotImplementedError
