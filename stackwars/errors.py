"""Exceptions with a meaning for the user.

``SpecError``: the user asked for something invalid (unknown name, bad size). The CLI
prints its message and exits with code 2 before any work or any write.
``Unsupported``: a valid request this machine or this backend cannot serve; the cell
is recorded with status ``unsupported``.
"""


class StackwarsError(Exception):
    pass


class SpecError(StackwarsError, ValueError):
    pass


class Unsupported(StackwarsError):
    pass
