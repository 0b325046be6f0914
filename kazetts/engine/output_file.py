"""Writing an output file without ever losing one: the WAV of `kazetts say -o`, a `.voice` file.

The data goes to a staging file that only this process can have made (created exclusively under a
unique name, so nothing planted at a predictable name is followed), and reaches the target only
when all of it was written:

- a regular file (or a new name) is replaced by renaming the staging file over it, so a failure
  leaves the previous file as it was, and no partial file is left behind;
- a device, FIFO or socket (`/dev/null`, `/dev/stdout`, a named pipe) is written in place, never
  replaced by a regular file; `/dev/full` fails with "no space left on device";
- a directory, the command's own input file, or (without `replace`) an existing file, is refused
  in one line before any work.
"""

from __future__ import annotations

import errno
import os
import pathlib
import shutil
import stat
import tempfile


class OutputFile:
    """Where one output goes. Write to `staging`, then `commit()`; `discard()` (always, e.g. in a
    finally) removes what was not committed. `what` names the output in messages."""

    def __init__(self, target: str | os.PathLike, *, replace: bool = True, inputs=(), what: str = "output"):
        self.target = pathlib.Path(target)
        self.what = what
        try:
            mode = os.stat(self.target).st_mode
        except FileNotFoundError:
            mode = None
        except OSError as e:
            raise OSError(f"cannot write the {what} {self.target}: {e.strerror or e}") from None
        if mode is not None and stat.S_ISDIR(mode):
            raise ValueError(f"{what} {self.target} is a directory; give a file name")
        if mode is not None:
            for source in inputs:
                if source is not None and _same_file(self.target, source):
                    raise ValueError(f"{what} {self.target} is also an input of this command ({source}); "
                                     "choose another name")
        self.in_place = mode is not None and not stat.S_ISREG(mode)
        if mode is not None and not self.in_place and not replace:
            raise FileExistsError(f"{what} {self.target} exists; give --force to replace it")
        parent = self.target.parent
        if parent.exists() and not parent.is_dir():
            raise ValueError(f"cannot write the {what} {self.target}: {parent} is not a directory")
        try:
            if not self.in_place:
                parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=None if self.in_place else parent, prefix=f".{self.target.name}.",
                                        suffix=".part")
        except OSError as e:
            raise OSError(f"cannot write the {what} {self.target}: {e.strerror or e}") from None
        os.close(fd)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(name, 0o666 & ~umask)  # what open() would give a new file, not mkstemp's 0600
        self.staging: pathlib.Path | None = pathlib.Path(name)

    def commit(self) -> pathlib.Path:
        """The staged bytes become the target (renamed over it, or copied into a device)."""
        if self.in_place:
            try:
                fd = os.open(self.target, os.O_WRONLY)  # no O_CREAT, no O_TRUNC: the node stays what it is
                with os.fdopen(fd, "wb") as out, open(self.staging, "rb") as data:
                    shutil.copyfileobj(data, out)
            except OSError as e:
                reason = "no space left on device" if e.errno == errno.ENOSPC else (e.strerror or str(e))
                raise OSError(f"cannot write the {self.what} {self.target}: {reason}") from None
            self.staging.unlink(missing_ok=True)
        else:
            os.replace(self.staging, self.target)
        self.staging = None
        return self.target

    def discard(self) -> None:
        if self.staging is not None:
            self.staging.unlink(missing_ok=True)
            self.staging = None


def _same_file(a: pathlib.Path, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
