"""The neural sheaf as explicit matrices: the coordinate layout, activation patterns, assembly of
``delta_Omega`` and the Laplacian blocks (pins, soft pins, reluctance edges, one resolver), harmonic
extension, completion of partially pinned networks, edge groups, certificates, sparse Cholesky
factors and free cochains in layout order.

May import ``network``, ``kernels`` and ``_common``.
"""

from .assembly import assemble
from .augmented import AugmentedSheafSystem
from .completion import Completion, NonUniqueCompletionError, complete
from .harmonic import HarmonicExtension
from .least_squares import harmonic_extension
from .layout import Block, Layout
from .pins import Reluctance, SoftPins
from .system import SheafSystem
from .verify import VerificationReport, verify

__all__ = ["Layout", "Block", "SheafSystem", "AugmentedSheafSystem", "assemble", "HarmonicExtension",
           "harmonic_extension", "VerificationReport", "verify", "SoftPins", "Reluctance", "complete", "Completion",
           "NonUniqueCompletionError"]
