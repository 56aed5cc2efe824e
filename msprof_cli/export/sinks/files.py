"""The files an export writes, made safely: atomic writes (a temporary name in the same directory,
then os.replace; stale temporaries of dead processes removed), output directories that are not
links and belong to the user or root, one file's slice names, and the clear message of a failed
write.
"""
from __future__ import annotations

import errno
import io
import os
import re
import secrets
import shutil
import stat
from pathlib import Path

from msprof_cli.errors import ExportError
from msprof_cli.raw.profdir import make_dir

FILE_MODE = 0o640
_TMP_RE = re.compile(r"^\..+\.tmp(\d+)\.[0-9a-f]{8}$")
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def write_error(path: Path, exc: OSError) -> ExportError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        how = ("the disk (or quota) is full. Free space on that file system and run the export "
               "again")
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        how = ("permission denied. Export as the owner of the PROF dir or make its directories "
               "writable (chmod u+w)")
    else:
        how = f"{exc.strerror or exc}"
    return ExportError(f"cannot write {path}: {how}. No partial file was left under that name; "
                       f"the raw data is unchanged.")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def clean_stale_temps(directory: Path) -> None:
    """Remove temporary files that exports killed midway left behind (their pid is gone).
    Scanned for every file an export opens, not once per directory: a killed worker's pid
    may still be a zombie at the first scan (tests/test_cluster.py)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for e in entries:
        m = _TMP_RE.match(e.name)
        if m and e.is_file(follow_symlinks=False) and not _pid_alive(int(m.group(1))):
            try:
                os.unlink(e.path)
            except OSError:
                pass


def _trusted_owner(uid: int) -> bool:
    euid = os.geteuid()
    return euid == 0 or uid in (euid, 0)


def output_dir(directory: Path) -> Path:
    """Create (0750) or check an output directory: never a symlink, never a directory that
    belongs to another user (root may write anywhere, as msprof-analyze allows)."""
    directory = Path(directory)
    if directory.is_symlink():
        raise ExportError(f"{directory} is a symbolic link; msprof never writes through links. "
                          f"Remove the link (a real directory is created in its place).")
    try:
        make_dir(directory)
        st = os.stat(directory, follow_symlinks=False)
    except OSError as exc:
        raise write_error(directory, exc) from None
    if not stat.S_ISDIR(st.st_mode):
        raise ExportError(f"{directory} exists and is not a directory; move it away so that "
                          f"the export can create the directory.")
    if not _trusted_owner(st.st_uid):
        raise ExportError(f"{directory} belongs to another user (uid {st.st_uid}); msprof "
                          f"refuses to write into it. Export as that user or remove the "
                          f"directory.")
    clean_stale_temps(directory)
    return directory


class AtomicFile:
    """``with AtomicFile(path) as fh:`` -- text file renamed into place on success."""

    def __init__(self, path: Path, owner_pid: int | None = None) -> None:
        """`owner_pid`: the process whose death makes the temporary file stale (default:
        this one; a piece written by a worker belongs to the export process)."""
        self.path = Path(path)
        pid = os.getpid() if owner_pid is None else owner_pid
        self.tmp = self.path.with_name(f".{self.path.name}.tmp{pid}.{secrets.token_hex(4)}")
        self.publish = True

    def open_temp(self) -> "AtomicFile":
        """``with AtomicFile(p).open_temp() as fh:`` writes the temporary file only: kept
        (not renamed) on success for the caller to use (`tmp`), removed on failure."""
        self.publish = False
        return self

    def __enter__(self) -> io.TextIOWrapper:
        output_dir(self.path.parent)
        try:
            fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW, FILE_MODE)
        except OSError as exc:
            raise write_error(self.path, exc) from None
        try:
            os.fchmod(fd, FILE_MODE)  # explicit: the umask must not widen or narrow it
            self.fh = open(fd, "w", encoding="utf-8", newline="")
        except BaseException:
            os.close(fd)
            self._discard()
            raise
        return self.fh

    def _discard(self) -> None:
        try:
            os.unlink(self.tmp)
        except OSError:
            pass

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.fh.close()  # flushes: a full disk may only show here
        except OSError as close_exc:
            self._discard()
            if exc_type is None:
                raise write_error(self.path, close_exc) from None
            if isinstance(exc, OSError):
                raise write_error(self.path, exc) from None
            return
        if exc_type is None:
            if not self.publish:
                return
            try:
                os.replace(self.tmp, self.path)
            except OSError as rep_exc:
                self._discard()
                raise write_error(self.path, rep_exc) from None
        else:
            self._discard()
            if isinstance(exc, OSError):
                raise write_error(self.path, exc) from None


def append_file(fh, src: Path) -> None:
    """Append the bytes of `src` to the open text file `fh` (flushed first), through an
    8 MiB buffer (os.copy_file_range measured 2x slower on this VM's file system)."""
    fh.flush()
    with open(src, "rb") as inp:
        shutil.copyfileobj(inp, fh.buffer, 8 << 20)


class SliceNamer:
    """Names of one output: ``{stem}{suffix}.{ext}`` or ``{stem}_slice_{k}{suffix}.{ext}``."""

    def __init__(self, directory: Path, stem: str, suffix: str, ext: str) -> None:
        self.directory, self.stem, self.suffix, self.ext = directory, stem, suffix, ext

    def single(self) -> Path:
        return self.directory / f"{self.stem}{self.suffix}.{self.ext}"

    def slice(self, k: int) -> Path:
        return self.directory / f"{self.stem}_slice_{k}{self.suffix}.{self.ext}"
