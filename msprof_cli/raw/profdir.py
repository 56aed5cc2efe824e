"""PROF_* directory naming and discovery (docs/formats/raw-format.md 2.1-2.3).  Standard library
only."""
from __future__ import annotations

import os
import random
import re
import string
import time
from pathlib import Path

PROF_RE = re.compile(r"^PROF_\d{6}_\d{17}_\w+$")
DEVICE_DIR_RE = re.compile(r"^device_(\d+)$")
DEVICE_INFO_RE = re.compile(r"^info\.json\.(\d+)$")
INFO_RE = re.compile(r"^info\.json")


def prof_dir_name(index: int = 0, now: float | None = None, rng: random.Random | None = None
                  ) -> str:
    """`PROF_{NNNNNN}_{YYYYMMDDhhmmssmmm}_{16 letters}`, local time."""
    now = time.time() if now is None else now
    ms = int((now - int(now)) * 1000)
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(now)) + f"{ms:03d}"
    letters = "".join((rng or random.SystemRandom()).choice(string.ascii_uppercase)
                      for _ in range(16))
    return f"PROF_{(index % 999999) + 1:06d}_{stamp}_{letters}"


DIR_MODE = 0o750  # directories msprof creates: owner rwx, group rx (as the real tool)


def make_dir(path: Path) -> None:
    """Create `path` (and missing parents) with mode 0750 whatever the umask: only the
    directories created here get the mode, existing ones are left alone."""
    missing = []
    p = Path(path)
    while not p.exists() and not p.is_symlink() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue  # created concurrently (two exports of one PROF dir)
        os.chmod(d, DIR_MODE)


def create_prof_dir(output_root: str | os.PathLike[str], index: int = 0) -> Path:
    """Create a new, uniquely named PROF dir (0750) under `output_root` (created if missing)."""
    root = Path(output_root)
    make_dir(root)
    for _ in range(100):
        path = root / prof_dir_name(index)
        try:
            path.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(path, DIR_MODE)
        return path
    raise FileExistsError(f"could not create a unique PROF dir under {root}")


def is_prof_dir(path: Path) -> bool:
    return path.is_dir() and PROF_RE.match(path.name) is not None


def is_result_dir(path: Path) -> bool:
    """A result dir (host/, device_N/) holds a file whose name starts with info.json."""
    try:
        return path.is_dir() and any(INFO_RE.match(p) for p in os.listdir(path))
    except OSError:
        return False


def _dir_key(name: str) -> tuple[int, int, str]:
    m = DEVICE_DIR_RE.match(name)
    return (0, int(m.group(1)), name) if m else (1, 0, name)


def result_dirs(prof: Path) -> list[Path]:
    """Result dirs of one PROF dir, sorted device_0, device_1, ..., host (docs/formats/query.md
    2)."""
    subs = [p for p in prof.iterdir() if not p.is_symlink() and is_result_dir(p)]
    return sorted(subs, key=lambda p: _dir_key(p.name))


def incomplete_result_dirs(prof: Path) -> list[Path]:
    """`host/` and `device_N/` dirs of a PROF dir that are not result dirs (no info.json*):
    their data cannot be decoded, and skipping them silently would hide lost data."""
    try:
        subs = [p for p in prof.iterdir() if (p.name == "host" or DEVICE_DIR_RE.match(p.name))
                and p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
    return sorted((p for p in subs if not is_result_dir(p)), key=lambda p: _dir_key(p.name))


def find_prof_dirs(path: Path, max_depth: int = 2) -> list[Path]:
    """`path` itself if it is a PROF dir, else every PROF dir below it (sorted by name)."""
    if is_prof_dir(path) or (path.is_dir() and any(is_result_dir(p) for p in _subdirs(path))
                             and not any(is_prof_dir(p) for p in _subdirs(path))):
        return [path]
    found: list[Path] = []
    frontier = [path]
    for _ in range(max_depth):
        nxt = []
        for d in frontier:
            for sub in _subdirs(d):
                if is_prof_dir(sub):
                    found.append(sub)
                else:
                    nxt.append(sub)
        frontier = nxt
    return sorted(found, key=lambda p: p.name)


def _subdirs(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


def device_id_of(result_dir: Path) -> int | None:
    """Device number of a `device_N` dir; None for `host`."""
    m = DEVICE_DIR_RE.match(result_dir.name)
    return int(m.group(1)) if m else None


class SliceNames:
    """The names of a kind's slice files, ``{stem}.slice_{n}`` with a stem of `stems` (or,
    `device_stems`, ``{stem}.{device}.slice_{n}``): `match` as a regex's, without compiling
    a regex per kind (Python's regex compiler cost ~0.2 ms a pattern, ~20 an export).  A
    name with a trailing newline, which the regex's ``$`` let through, is not a slice."""

    __slots__ = ("stems", "device")

    def __init__(self, stems: tuple[str, ...], device: bool = False) -> None:
        self.stems = stems
        self.device = device

    def match(self, name: str) -> bool:
        head, sep, n = name.rpartition(".slice_")
        if not sep or not n.isdecimal():  # \d+ (decimal digits), the whole rest
            return False
        if self.device:
            head, dot, dev = head.rpartition(".")
            if not dot or not dev.isdecimal():
                return False
        return head in self.stems


def slice_files(data_dir: Path, regex: "re.Pattern[str] | SliceNames") -> list[Path]:
    """Data files matching `regex`, in (aging before unaging, slice number) order."""
    if not data_dir.is_dir():
        return []
    files = []
    for p in data_dir.iterdir():
        if regex.match(p.name) and p.is_file() and not p.is_symlink():
            m = re.search(r"slice_(\d+)$", p.name)
            aging = 0 if p.name.startswith("aging.") else 1
            files.append((aging, int(m.group(1)) if m else 0, p))
    return [p for _, _, p in sorted(files, key=lambda t: (t[0], t[1]))]


def locate(path: Path) -> list[Path]:
    """The PROF dirs at `path` (a PROF dir or a directory holding some), or the one message
    every subcommand gives for the same mistake (export and query alike; the no-PROF case
    starts with the real tool's query text)."""
    from msprof_cli.errors import ProfDirError

    path = Path(path)
    if not path.exists():
        raise ProfDirError(f'The path "{path}" does not exist. Pass a PROF_* directory written '
                           f"by `msprof collect`, or the directory holding it, to --output.")
    if not path.is_dir():
        raise ProfDirError(f'The path "{path}" is a file, not a directory. Pass a PROF_* '
                           f"directory, or the directory holding it, to --output.")
    # a PROF dir, or a dir whose direct children are PROF dirs (a collect output, a job
    # dir): never every PROF dir somewhere below (`--output /tmp` used to export other
    # users' and other runs' collections)
    profs = find_prof_dirs(path, max_depth=1)
    if not profs:
        deeper = find_prof_dirs(path, max_depth=3)
        if deeper:
            shown = "\n".join(f"  msprof export --output {p}" for p in deeper[:10])
            more = f"\n  ... and {len(deeper) - 10} more" if len(deeper) > 10 else ""
            raise ProfDirError(
                f'The path "{path}" is not a PROF dir and holds none directly; {len(deeper)} '
                f"PROF dir(s) lie deeper below it. Pass the one you mean (or the directory "
                f"that directly holds it):\n{shown}{more}")
        raise ProfDirError(f'The path "{path}" does not have PROF dir. Please check the path: '
                           f"run `msprof collect` first, then pass its output directory (or a "
                           f"PROF_* directory in it) to --output.")
    return profs


def check_has_result_dirs(prof: Path) -> None:
    """The message for a PROF dir the collection wrote nothing into (export and query)."""
    from msprof_cli.errors import ProfDirError

    if not result_dirs(prof):
        raise ProfDirError(f"{prof} holds no result directory (host/ or device_N/ with an "
                           "info.json file): the collection wrote nothing. Re-run "
                           "`msprof collect`.")


RESULT_DIR_RE = re.compile(r"^(host|device_\d+)$")


def check_no_links(prof: Path) -> None:
    """Refuse a PROF dir whose host/ or device_N/ directory, or their data/ folder, is a
    symbolic link: a PROF dir must not point outside itself (`device_0 -> /` used to export
    nothing and say nothing).  Export and query alike."""
    from msprof_cli.errors import ProfDirError

    try:
        subs = list(Path(prof).iterdir())
    except OSError:
        return  # reported by the caller's own listing
    for p in subs:
        links = [p] if p.is_symlink() and RESULT_DIR_RE.match(p.name) else []
        if not links and RESULT_DIR_RE.match(p.name) and (p / "data").is_symlink():
            links = [p / "data"]
        for link in links:
            raise ProfDirError(f"{link} is a symbolic link (to {os.readlink(link)}); a PROF "
                               f"dir must not point outside itself, so msprof does not follow "
                               f"it. Replace the link with the real directory (copy the data "
                               f"in), or remove it to export the rest.")
