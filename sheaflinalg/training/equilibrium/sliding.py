"""The search for a self-consistent activation pattern, with Filippov equilibria on switching surfaces.

After each frozen-pattern solve the pattern is read off the solution
(``z >= 0`` active).  A sample whose pattern agrees is settled; otherwise its
pattern flips where they disagree.  A pattern that would come back (a cycle)
is a sign of an equilibrium on switching surfaces: at a hidden coordinate
``z_j = 0`` the weight edge pushes ``z_j`` with ``q_j = (W a + b)_j`` from
below (inactive side), the weight and activation edges together with
``q_j + a_j`` from above (active side); when both push into the surface
(``q_j >= 0 >= q_j + a_j``) the state slides, and the Filippov equilibrium
holds ``z_j = 0`` with the force ``q_j + theta a_j = 0``,
``theta = -q_j / a_j`` in ``[0, 1]``.  It is the energy's minimiser with
those coordinates held at 0 (one more row each in the frozen solve).  So the
coordinates that would flip back are *held*; a consistent solution is
accepted when Filippov's condition holds at every held coordinate, and a held
coordinate that fails it is released to the side it is pushed to (as
:mod:`sheaflinalg.discord.pinning.analysis` does for the pinned discord, one
sample at a time; here every sample of the batch searches at once).
"""

import numpy as np


def pattern_key(vectors):
    """Bytes identifying one sample's pattern (``vectors``: its 0/1 mask per hidden layer)."""
    return b"".join(np.packbits(v > 0).tobytes() for v in vectors)


class PatternSearch:
    """Every sample's pattern, held coordinates and the patterns it has visited.

    Parameters
    ----------
    masks : list of ndarray
        ``(S, n_l)`` 0/1 float masks to start from (the forward pattern); updated in place.
    n_samples : int
        ``S`` (a chain without hidden layers has no masks).
    """

    def __init__(self, masks, n_samples):
        self.masks = masks
        S = n_samples
        self.surface = [set() for _ in range(S)]
        self.seen = [None] * S      # filled when the sample's pattern first changes

    def held(self, rows):
        """The held coordinates of the samples ``rows`` (sorted lists), or None when none has any."""
        out = [sorted(self.surface[s]) for s in rows]
        return out if any(out) else None

    def update(self, rows, frozen, Ws, bs, X):
        """Read the patterns off ``frozen`` (the solution of the samples ``rows``); returns which are settled."""
        disagree = [(z >= 0) != (m[rows] > 0) for z, m in zip(frozen.Zs[:-1], self.masks)]
        changed = np.zeros(rows.size, dtype=bool)
        for d in disagree:
            changed |= d.any(axis=1)
        settled = ~changed
        for i, s in enumerate(rows):
            if self.surface[s] or changed[i]:
                settled[i] = self._one(s, i, disagree, frozen, Ws, bs, X)
        return settled

    def _one(self, s, i, disagree, frozen, Ws, bs, X):
        """One sample's step: settled (True), or its pattern or held coordinates changed (False)."""
        surface = self.surface[s]
        flips = {(l, int(j)) for l, d in enumerate(disagree, start=1) for j in np.flatnonzero(d[i])} - surface
        if not flips:
            released = self._release(s, i, frozen, Ws, bs, X)
            surface -= released
            return not released
        new = [m[s].copy() for m in self.masks]
        for l, j in flips:
            new[l - 1][j] = 1.0 - new[l - 1][j]
        if self.seen[s] is None:
            self.seen[s] = {(pattern_key([m[s] for m in self.masks]), frozenset())}
        key = (pattern_key(new), frozenset(surface))
        if key in self.seen[s]:
            surface |= flips            # the pattern would cycle: the coordinates that flip slide
        else:
            self.seen[s].add(key)
            for m, n in zip(self.masks, new):
                m[s] = n
        return False

    def _release(self, s, i, frozen, Ws, bs, X):
        """Held coordinates of sample ``s`` where Filippov's condition fails, their masks set to the side
        they are pushed to."""
        released = set()
        for l, j in self.surface[s]:
            a_prev = X[s] if l == 1 else frozen.As[l - 2][i]
            q = Ws[l - 1][j] @ a_prev + bs[l - 1][j]
            a = frozen.As[l - 1][i, j]
            if not (q >= 0.0 and q + a <= 0.0):
                released.add((l, j))
                self.masks[l - 1][s, j] = float(q + a > 0.0)
        return released
