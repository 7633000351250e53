"""Rounds of compiled work short enough to honour Ctrl-C.

A compiled loop holds the interpreter until it returns: a SIGINT is only
acted on between calls.  Long loops are therefore called in rounds of about
:data:`ROUND_SECONDS`, their length in steps adapted from the measured time of
the previous rounds.
"""

import time

ROUND_SECONDS = 0.1


class Rounds:
    """Round lengths (in steps) near :data:`ROUND_SECONDS` each, within ``[1, limit]``.

    Examples
    --------
    >>> rounds = Rounds(limit=10**6, first=100)
    >>> rounds.steps
    100
    >>> rounds.update(100, 0.001)      # 10 us per step: 10,000 steps make 0.1 s
    >>> rounds.steps
    400
    """

    def __init__(self, limit, first=256):
        self.limit = max(1, int(limit))
        self.steps = min(self.limit, first)

    def update(self, steps, seconds):
        """Record that the last round ran ``steps`` steps in ``seconds``; grow at most 4x a round."""
        if steps > 0 and seconds > 0:
            self.steps = int(min(self.limit, 4 * self.steps, max(1, ROUND_SECONDS * steps / seconds)))

    def run(self, total, call):
        """``call(n)`` for rounds of ``n`` steps until ``total`` steps ran; ``call`` returns the steps done
        (fewer ends the loop).  Returns the steps done in all."""
        done = 0
        while done < total:
            n = min(self.steps, total - done)
            start = time.perf_counter()
            k = call(n)
            self.update(k, time.perf_counter() - start)
            done += k
            if k < n:
                break
        return done
