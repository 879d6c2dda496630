"""The exclusive lock of a result store: an OS lock on the file ``<store>/.lock``.

On POSIX systems the lock is ``fcntl.flock(LOCK_EX | LOCK_NB)``; on Windows a
``msvcrt.locking`` byte-range lock. Either is released by the operating system
when the holder exits or is killed, so a stale lock cannot block a store. The
holder writes its process id into the file, for error messages only. The file
itself is never deleted (deleting a lock file while others wait on it would
let two processes hold "the" lock at once).
"""

from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

__all__ = ["StoreLock"]

#: Offset of the byte locked on Windows (beyond the pid text, which others must be able to read).
_WINDOWS_LOCK_OFFSET = 1 << 30


def _try_lock(fd: int) -> bool:
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except (BlockingIOError, PermissionError):
        return False
    except OSError as exc:
        if fcntl is None:  # msvcrt reports a held lock as a plain OSError (EDEADLOCK / EACCES)
            return False
        raise exc
    return True


class StoreLock:
    """An exclusive, non-blocking lock on one file, held until :meth:`release` or process exit.

    Parameters
    ----------
    path : str or pathlib.Path
        The lock file (created if needed).

    Examples
    --------
    >>> lock = StoreLock(tmp_path / ".lock")  # doctest: +SKIP
    >>> lock.acquire(), StoreLock(tmp_path / ".lock").acquire()  # doctest: +SKIP
    (True, False)
    """

    def __init__(self, path):
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> bool:
        """Take the lock if it is free and record this process id in the file; return whether it was taken."""
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            if not _try_lock(fd):
                os.close(fd)
                return False
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"{os.getpid():<20d}\n".encode("ascii"))
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def holder(self) -> int | None:
        """Return the process id recorded by the last holder, or ``None`` if unknown."""
        try:
            return int(self.path.read_text(encoding="ascii").split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def release(self) -> None:
        """Release the lock (closing the file releases it)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self):
        self.release()
