"""The neural sheaf: the coordinate layout, activation patterns, free cochains and the harmonic extension
at the top; one folder per way of computing with it: ``assembled/`` (sparse matrices), ``matrix_free/``
(operators node by node), ``skip_edges/`` (the paper's encoding of skips), ``pins/`` (pins and
completion), ``verification/`` (certificates).

May import ``network``, ``kernels`` and ``_common``.
"""

from .assembled.assembly import assemble
from .assembled.augmented import AugmentedSheafSystem
from .pins.completion import Completion, NonUniqueCompletionError, complete
from .harmonic import HarmonicExtension
from .skip_edges.least_squares import harmonic_extension
from .layout import Block, Layout
from .pins.specs import Reluctance, SoftPins
from .assembled.system import SheafSystem
from .verification.verify import VerificationReport, verify

__all__ = ["Layout", "Block", "SheafSystem", "AugmentedSheafSystem", "assemble", "HarmonicExtension",
           "harmonic_extension", "VerificationReport", "verify", "SoftPins", "Reluctance", "complete", "Completion",
           "NonUniqueCompletionError"]
