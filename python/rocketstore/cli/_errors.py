"""The ``rocketstore`` command's exit statuses and its one-line errors.

Every failure of a command is one line on stderr, ``rocketstore COMMAND: what went wrong``,
and an exit status that says which kind of failure it was (``rocketstore --help`` lists them):

====  ======================================================================================
 0    success
 1    a check failed (``verify``, ``demo``): the command ran, the data is not right
 2    usage: bad arguments or options
 3    the store refused: locked by a writer, corrupt, unsupported format, bad configuration
 4    not found: no such file or directory, no store there, no such topic/queue
 5    permission denied
 6    another I/O error (disk full, I/O error, ...)
 7    a missing optional dependency (PySpark, Java) for this command
 70   an internal error (a bug): set ``ROCKETSTORE_DEBUG=1`` for the traceback
 130  interrupted (Ctrl-C)
 141  the reader of stdout went away (``| head``)
====  ======================================================================================
"""

from __future__ import annotations

import errno

__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_CODES_HELP",
    "EXIT_DEPENDENCY",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_IO",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_PERMISSION",
    "EXIT_PIPE",
    "EXIT_STORE",
    "EXIT_USAGE",
    "CliError",
    "exit_status",
]

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_STORE = 3
EXIT_NOT_FOUND = 4
EXIT_PERMISSION = 5
EXIT_IO = 6
EXIT_DEPENDENCY = 7
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_PIPE = 141

#: The exit statuses as ``rocketstore --help`` shows them.
EXIT_CODES_HELP = """\
exit status:
  0    success
  1    a check failed (verify, demo): the command ran, the data is not right
  2    usage: bad arguments or options
  3    the store refused: locked by a writer, corrupt, unsupported, bad configuration
  4    not found: no such path, no store there, no such topic/queue
  5    permission denied
  6    another I/O error (disk full, EIO, ...)
  7    a missing dependency for this command (PySpark, Java)
  70   internal error (set ROCKETSTORE_DEBUG=1 for the traceback)
  130  interrupted (Ctrl-C)
  141  stdout closed by its reader (| head)
"""


class CliError(Exception):
    """A failure the command reports as one line with exit status ``status``."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def exit_status(e: BaseException) -> int:
    """The exit status of a command that failed with ``e``."""
    from rocketstore.exceptions import MessageStoreError, StoreIOError

    if isinstance(e, CliError):
        return e.status
    if isinstance(e, StoreIOError) or (
        isinstance(e, OSError) and not isinstance(e, MessageStoreError)
    ):
        code = e.errno
        if isinstance(e, FileNotFoundError | NotADirectoryError) or code in (
            errno.ENOENT,
            errno.ENOTDIR,
        ):
            return EXIT_NOT_FOUND
        if isinstance(e, PermissionError) or code in (errno.EACCES, errno.EPERM):
            return EXIT_PERMISSION
        return EXIT_IO
    if isinstance(e, MessageStoreError):
        return EXIT_STORE
    if isinstance(e, ImportError):
        return EXIT_DEPENDENCY
    return EXIT_INTERNAL
