"""Writing an output file without ever losing one: the WAV of `kazetts say -o`, a `.voice` file.

The data goes to a staging file that only this process can have made (created exclusively under a
random name, so nothing planted at a predictable name is followed), and reaches the target only
when all of it was written:

- a regular file (or a new name) is replaced by renaming the staging file over it, so a failure
  leaves the previous file as it was, and no partial file is left behind; a symbolic link is
  kept, the file it points to is the one replaced;
- a character device or FIFO (`/dev/null`, a named pipe) and the process's own streams
  (`/dev/stdout`, `/dev/fd/N`) are written in place, never replaced by a regular file;
  `/dev/full` fails with "no space left on device";
- a directory, a block device or socket, the command's own input file, or (without `replace`)
  an existing file, is refused in one line before any work.
"""

from __future__ import annotations

import errno
import os
import pathlib
import secrets
import shutil
import stat
import tempfile

# paths that name one of this process's open files: written through that file descriptor
_STREAMS = {"/dev/stdout": 1, "/dev/stderr": 2}
_FD_FOLDERS = ("/dev/fd/", "/proc/self/fd/")
_MAX_NAME = 255  # bytes in a file name (NAME_MAX)


class OutputFile:
    """Where one output goes. Write to `staging`, then `commit()`; `discard()` (always, e.g. in a
    finally) removes what was not committed. `what` names the output in messages, `replace_hint`
    says how to replace an existing file when `replace` is False."""

    def __init__(
        self,
        target: str | os.PathLike,
        *,
        replace: bool = True,
        inputs=(),
        what: str = "output",
        replace_hint: str = "pass replace=True to replace it",
    ):
        self.target, self.in_place, self.what = _checked_target(target, replace, inputs, what, replace_hint)
        folder = pathlib.Path(tempfile.gettempdir()) if self.in_place else self.target.parent
        try:
            if not self.in_place:
                folder.mkdir(parents=True, exist_ok=True)
            self.staging: pathlib.Path | None = _create_exclusively(folder, self.target.name)
        except OSError as e:
            raise OSError(f"cannot write the {what} {self.target}: {e.strerror or e}") from None

    @staticmethod
    def check(
        target,
        *,
        replace: bool = True,
        inputs=(),
        what: str = "output",
        replace_hint: str = "pass replace=True to replace it",
    ) -> None:
        """The refusals of the constructor alone, creating nothing (before a long job)."""
        _checked_target(target, replace, inputs, what, replace_hint)

    def commit(self) -> pathlib.Path:
        """The staged bytes become the target (renamed over it, or copied into a device)."""
        try:
            if self.in_place:
                fd = stream_fd(self.target)  # one of ours: from where it stands, as a shell redirection
                fd = os.dup(fd) if fd is not None else os.open(self.target, os.O_WRONLY)  # never O_CREAT / O_TRUNC
                with os.fdopen(fd, "wb") as out, open(self.staging, "rb") as data:
                    shutil.copyfileobj(data, out)
                self.staging.unlink(missing_ok=True)
            else:
                os.replace(self.staging, self.target)
        except OSError as e:
            reason = "no space left on device" if e.errno == errno.ENOSPC else (e.strerror or str(e))
            raise OSError(f"cannot write the {self.what} {self.target}: {reason}") from None
        self.staging = None
        return self.target

    def discard(self) -> None:
        if self.staging is not None:
            self.staging.unlink(missing_ok=True)
            self.staging = None


def _checked_target(target, replace: bool, inputs, what: str, replace_hint: str) -> tuple[pathlib.Path, bool, str]:
    """(the path to write, whether it is written in place, what), or the refusal."""
    given = pathlib.Path(target)
    stream = stream_fd(given) is not None
    path = given if stream else pathlib.Path(os.path.realpath(given))  # through symbolic links
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # (the second: a file on the way, said below)
        mode = None
    except OSError as e:
        raise OSError(f"cannot write the {what} {given}: {e.strerror or e}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise ValueError(f"{what} {given} is a directory; give a file name")
    if mode is not None and (stat.S_ISBLK(mode) or stat.S_ISSOCK(mode)):
        kind = "block device" if stat.S_ISBLK(mode) else "socket"
        raise ValueError(f"{what} {given} is a {kind}: not something to write an output to")
    if mode is not None:
        for source in inputs:
            if source is not None and _same_file(path, source):
                raise ValueError(f"{what} {given} is also an input of this command ({source}); choose another name")
    in_place = mode is not None and (stream or not stat.S_ISREG(mode))
    if mode is not None and not in_place and not replace:
        raise FileExistsError(f"{what} {given} exists; {replace_hint}")
    if not in_place and path.parent.exists() and not path.parent.is_dir():
        raise ValueError(f"cannot write the {what} {given}: {path.parent} is not a directory")
    return path, in_place, what


def stream_fd(path) -> int | None:
    """The file descriptor a path like /dev/stdout or /dev/fd/3 names, else None."""
    text = str(path)
    if text in _STREAMS:
        return _STREAMS[text]
    folder = next((f for f in _FD_FOLDERS if text.startswith(f)), None)
    return int(text[len(folder) :]) if folder and text[len(folder) :].isdigit() else None


def _create_exclusively(folder: pathlib.Path, name: str) -> pathlib.Path:
    """A new empty file in `folder` that no one else made (O_EXCL, a random name), with the
    permissions open() gives a new file (the umask applied by the kernel)."""
    stem = os.fsencode(name)[: _MAX_NAME - 32].decode("utf-8", "ignore")
    while True:
        path = folder / f".{stem}.{secrets.token_hex(8)}.part"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            return path
        except FileExistsError:
            continue


def _same_file(a: pathlib.Path, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
