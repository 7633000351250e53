"""One block runner for the thread pools: a function applied to independent blocks of work.

Every parallel loop of the package (harmonic extensions, dense spectra, the
Euler heat kernel's parts, the exact flow's sample blocks) cuts its work into
blocks by the problem's size alone and applies one function to every block.
:class:`BlockRunner` runs them in a pool of threads (the kernels and LAPACK
release the GIL) or, with one thread or one block, in the calling thread.
Results come back in block order whatever the thread count, so a computation
that writes each block's result in its own place is the same bit for bit for
any number of threads.  A runner may serve several rounds (one pool), and on
exit, Ctrl-C included, cancels what has not started.
"""

from concurrent.futures import ThreadPoolExecutor


class BlockRunner:
    """Apply functions to blocks with up to ``threads`` threads (a context manager).

    Parameters
    ----------
    threads : int
        Threads wanted (positive).
    n_blocks : int
        Most blocks a round will have: no more threads than that are started.

    Examples
    --------
    >>> with BlockRunner(threads=2, n_blocks=3) as runner:
    ...     runner.map(lambda b: b * b, [1, 2, 3])
    [1, 4, 9]
    """

    def __init__(self, threads, n_blocks):
        workers = min(int(threads), int(n_blocks))
        self._pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 else None

    def map(self, fn, blocks):
        """``[fn(b) for b in blocks]``, in the pool's threads when there is a pool and more than one block."""
        blocks = list(blocks)
        if self._pool is None or len(blocks) < 2:
            return [fn(b) for b in blocks]
        futures = [self._pool.submit(fn, b) for b in blocks]
        return [f.result() for f in futures]

    def close(self):
        """Stop the threads; blocks not started are cancelled."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def map_blocks(fn, blocks, threads):
    """``[fn(b) for b in blocks]`` with up to ``threads`` threads (one round of a :class:`BlockRunner`).

    Examples
    --------
    >>> map_blocks(abs, [-1, -2, 3], threads=2)
    [1, 2, 3]
    """
    blocks = list(blocks)
    with BlockRunner(threads, len(blocks)) as runner:
        return runner.map(fn, blocks)


def block_bounds(M, work_per_sample, block_work, max_blocks, min_block_samples=1):
    """Row bounds ``[0, ..., M]`` of equal sample blocks, chosen by the work alone (never the thread count).

    As many blocks as hold at least ``block_work`` units of work and ``min_block_samples``
    samples each, at most ``max_blocks``; one block when the batch is small.  The one rule
    every batched computation cuts its batch by, so that its result is the same for any
    number of threads.

    Examples
    --------
    >>> block_bounds(500, 1_003_000, 1 << 19, 16, 128)
    [0, 167, 334, 500]
    >>> block_bounds(10, 100, 1 << 19, 16)
    [0, 10]
    """
    n = max(1, min(max_blocks, M // min_block_samples, M * work_per_sample // block_work))
    per = -(-M // n)
    return [min(M, k * per) for k in range(n)] + [M]
