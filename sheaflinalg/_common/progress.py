"""Progress bars (tqdm), one style for every long-running loop of the package.

``enabled`` is every public function's ``progress`` flag: it must be a bool
(``progress="no"`` would show the bar).
"""

from .interrupt import check_interrupt
from .validation import check_bool


def progress_bar(total, enabled, desc, unit="it"):
    """A tqdm bar of ``total`` units, disabled (but still usable) when ``enabled`` is false."""
    enabled = check_bool(enabled, "progress")
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc=desc, unit=unit, leave=False)


def progress_iter(iterable, total, enabled, desc):
    """``iterable`` wrapped in a tqdm bar when ``enabled`` and there are at least two items.

    Before each item it checks for a Ctrl-C that a finaliser swallowed (:mod:`._common.interrupt`).
    """
    if not check_bool(enabled, "progress") or total < 2:
        return _checked(iterable)
    from tqdm.auto import tqdm

    return _checked(tqdm(iterable, total=total, desc=desc, leave=False))


def _checked(iterable):
    for item in iterable:
        check_interrupt()
        yield item
