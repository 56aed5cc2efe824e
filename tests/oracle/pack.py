"""Add (or replace) one fresh oracle case in the fixtures of tests/oracle/README.md.

    .venv/bin/python tests/oracle/pack.py CASE RAW_PROF REAL_OUTPUT

RAW_PROF: the PROF dir `msprof collect` wrote (untouched: export a copy of it); REAL_OUTPUT:
the `mindstudio_profiler_output/` the real analysis wrote from another copy (`msprof.py export
summary -dir COPY`, then `export timeline -dir COPY`).  The raw dir goes into
raw_fresh.tar.xz as `CASE/PROF_*`, the analysis's CSV and JSON files into expected.tar.xz as
`CASE/{name}.{csv,json}` (export time stamp dropped, README.txt left out).  Members are
written in name order with a fixed time and owner, so a re-pack of the same files gives the
same members.
"""
from __future__ import annotations

import io
import re
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RAW_TAR = HERE / "raw_fresh.tar.xz"
EXPECTED_TAR = HERE / "expected.tar.xz"
MTIME = 1796169600  # the time of the members already packed
_STAMP = re.compile(r"_\d{14}(?=\.(csv|json)$)")


def _members(path: Path, drop: str) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """The members of a tar (with their bytes) but those of case `drop`."""
    out = []
    with tarfile.open(path, "r:xz") as tar:
        for m in tar.getmembers():
            if m.name == drop or m.name.startswith(drop + "/"):
                continue
            out.append((m, tar.extractfile(m).read() if m.isfile() else None))
    return out


def _info(name: str, data: bytes | None) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = MTIME, 0, 0, "", ""
    if data is None:
        ti.type, ti.mode = tarfile.DIRTYPE, 0o755
    else:
        ti.size, ti.mode = len(data), 0o644
    return ti


def _tree(root: Path, arc: str, keep=lambda p: True, rename=lambda n: n):
    yield _info(arc, None), None
    for p in sorted(root.rglob("*")):
        if not keep(p):
            continue
        name = f"{arc}/{rename(p.relative_to(root).as_posix())}"
        data = None if p.is_dir() else p.read_bytes()
        yield _info(name, data), data


def _write(path: Path, members) -> None:
    members = sorted(members, key=lambda m: m[0].name)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        for ti, data in members:
            tar.addfile(ti, io.BytesIO(data) if data is not None else None)
    path.write_bytes(buf.getvalue())
    print(f"wrote {path} ({len(members)} members, {path.stat().st_size} bytes)")


def main(case: str, raw_prof: Path, real_out: Path) -> None:
    if not raw_prof.name.startswith("PROF_"):
        raise SystemExit(f"{raw_prof}: not a PROF_* dir")
    raw = _members(RAW_TAR, case) + [(_info(case, None), None)] + list(
        _tree(raw_prof, f"{case}/{raw_prof.name}"))
    expected = _members(EXPECTED_TAR, case) + list(_tree(
        real_out, case, keep=lambda p: p.suffix in (".csv", ".json"),
        rename=lambda n: _STAMP.sub("", n)))
    _write(RAW_TAR, raw)
    _write(EXPECTED_TAR, expected)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(sys.argv[1], Path(sys.argv[2]).resolve(), Path(sys.argv[3]).resolve())
