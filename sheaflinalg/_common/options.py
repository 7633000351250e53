"""Keyword options that only some methods of a function use: given or not, and refused where they do not apply.

A function with several methods (``heat(method="euler" | "exact")``, ``train``)
takes flat keywords.  Each method-specific keyword defaults to a
:class:`Default` (its repr, ``<default 0.01>``, reads well in ``help()``), so
that a value the caller gave is told apart from the default.  :func:`method_options`
checks ``method`` and refuses every option given that the chosen method does not
use, naming the option and the method, before any work starts.
"""

from .validation import check_choice


class Default:
    """The default value of a method-specific option (a caller's value is never a :class:`Default`).

    Examples
    --------
    >>> Default(0.01)
    <default 0.01>
    """

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"<default {self.value!r}>"


def value_of(option):
    """The value of an option: its default's value when it was not given."""
    return option.value if isinstance(option, Default) else option


def method_options(function, method, methods, options):
    """Check ``method`` and return the values of the options it uses.

    Parameters
    ----------
    function : str
        Name of the public function (for messages), e.g. ``"heat"``.
    method : str
        The method asked for.
    methods : dict
        ``{method: tuple of the option names it uses}``.
    options : dict
        ``{name: value}`` of every method-specific option (a :class:`Default` when not given).

    Returns
    -------
    dict
        ``{name: value}`` of the options ``method`` uses (defaults resolved).

    Raises
    ------
    ValueError
        ``method`` is unknown (the choices are listed), or an option was given that ``method``
        does not use (the option, the method and the methods that use it are named).

    Examples
    --------
    >>> methods = {"euler": ("dt",), "exact": ("t_max",)}
    >>> method_options("heat", "euler", methods, {"dt": 0.5, "t_max": Default(None)})
    {'dt': 0.5}
    >>> try:
    ...     method_options("heat", "exact", methods, {"dt": 0.5, "t_max": Default(None)})
    ... except ValueError as exc:
    ...     print(exc)
    heat(method='exact') does not use dt (an option of method='euler' only); remove it or choose that method
    """
    check_choice(method, tuple(methods), "method")
    used = methods[method]
    for name, value in options.items():
        if name not in used and not isinstance(value, Default):
            users = " or ".join(f"method={m!r}" for m, names in methods.items() if name in names)
            raise ValueError(f"{function}(method={method!r}) does not use {name} (an option of {users} only); "
                             f"remove it or choose that method")
    return {name: value_of(options[name]) for name in used}
