"""Bad input: export and query give a clear error (class, message, exit code) or a
precise warning, and the raw data is byte-identical afterwards."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from msprof_cli.cli.main import main
from msprof_cli.errors import ExportError, ProfDirError, RawDataError
from msprof_cli.export.api import run_export
from msprof_cli.export.decode import rawread
from msprof_cli.export.decode.dataset import load_prof
from msprof_cli.export.sinks import files, writers
from msprof_cli.query import query_rows
from msprof_cli.raw import layouts as L
from tests.reliability_fixtures import data_file, golden, snapshot

GOLDEN_TASKS = 18  # AI Core tasks of the golden device (36 hwts records)


@pytest.fixture
def prof(tmp_path: Path) -> Path:
    return golden(tmp_path)


def cli(capsys, *args: str) -> tuple[int, str]:
    """Run `msprof ARGS` in-process; (exit code, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code, capsys.readouterr().err


def export_fails(prof: Path, error: type, message: str) -> None:
    """export AND query both raise `error` containing `message`; raw data unchanged."""
    before = snapshot(prof)
    with pytest.raises(error) as e1:
        run_export(prof, quiet=True)
    assert message in str(e1.value)
    with pytest.raises(error) as e2:
        query_rows(prof)
    assert message in str(e2.value)
    assert snapshot(prof) == before


# --- not a PROF dir / empty --------------------------------------------------------------

def test_folder_that_is_not_a_prof_dir(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("hello")
    code, err = cli(capsys, "export", "--output", str(tmp_path / "x"))
    assert code == 3
    msg = f'[ERROR] The path "{tmp_path / "x"}" does not have PROF dir. Please check the path'
    assert msg in err and "run `msprof collect` first" in err
    code, err_q = cli(capsys, "query", "--output", str(tmp_path / "x"))
    assert code == 3 and err_q == err  # one message for the same mistake
    assert (tmp_path / "x" / "notes.txt").read_text() == "hello"


def test_empty_prof_dir(tmp_path, capsys):
    empty = tmp_path / "PROF_000001_20250101120000123_ABCDEFGHIJKLMNOP"
    empty.mkdir()
    with pytest.raises(ProfDirError, match="holds no result directory"):
        run_export(empty, quiet=True)
    with pytest.raises(ProfDirError, match="holds no result directory"):
        query_rows(empty)
    code, err = cli(capsys, "query", "--output", str(empty))
    assert code == 3 and "the collection wrote nothing" in err
    assert list(empty.iterdir()) == []


# --- control files -----------------------------------------------------------------------

@pytest.mark.parametrize("name, message", [
    ("device_0/start_info.0", "device_0 has no start_info file: the collection did not start "
                              "properly"),
    ("device_0/sample.json", "device_0 has no sample.json file: it records the collection "
                             "switches"),
    ("device_0/info.json.0", "device_0 has no info.json"),
    ("host/sample.json", "host has no sample.json file"),
])
def test_missing_control_file(prof, name, message):
    (prof / name).unlink()
    export_fails(prof, ProfDirError, message)


@pytest.mark.parametrize("name, content, message", [
    ("device_0/info.json.0", "{bad", "info.json.0: unreadable control file (not one line of "
                                     "JSON: Expecting property name enclosed in double quotes "
                                     "at column 2)"),
    ("device_0/start_info.0", '["not", "an object"]', "start_info.0: unreadable control file "
                                                      "(must hold a JSON object ({...}))"),
    ("device_0/sample.json", "[1,2", "sample.json: unreadable control file (not one line of "
                                     "JSON: Expecting ',' delimiter at column 5)"),
    ("host/start_info", '{"collectionTimeBegin": "soon", "clockMonotonicRaw": "1"}',
     "start_info: collectionTimeBegin = 'soon' is not an integer"),
    ("device_0/start_info.0", '{"clockMonotonicRaw": "1"}',
     "start_info.0: the key 'collectionTimeBegin' is missing"),
    ("device_0/sample.json", '{"ai_core_profiling_events": "0x8,zz"}',
     "sample.json: ai_core_profiling_events / l2CacheTaskProfilingEvents must be "
     "comma-separated hex numbers"),
    ("device_0/sample.json", b"{\"a\": \"\xff\xfe\"}", "sample.json: unreadable control file "
                                                      "(not UTF-8 text"),
])
def test_malformed_control_file(prof, name, content, message):
    p = prof / name
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = snapshot(prof)
    with pytest.raises(ProfDirError) as exc:
        run_export(prof, quiet=True)
    assert message in str(exc.value)
    assert "re-collect" in str(exc.value)  # how to fix
    assert snapshot(prof) == before


def test_malformed_info_json_in_query(prof, capsys):
    (prof / "device_0" / "info.json.0").write_text("{bad")
    code, err = cli(capsys, "query", "--output", str(prof))
    assert code == 3
    assert "info.json.0: unreadable control file (not one line of JSON" in err
    assert "restore it from a backup or re-collect the data" in err


def test_unknown_chip(prof, capsys):
    info = prof / "device_0" / "info.json.0"
    info.write_text(info.read_text().replace('"platform_version": "1"',
                                             '"platform_version": "4"'))
    export_fails(prof, ProfDirError, 'info.json.0: platform_version "4" (Ascend310P) is not '
                                     'supported. msprof_cli decodes Ascend910 (platform_version '
                                     '"1") and Ascend910B')
    code, err = cli(capsys, "export", "--output", str(prof))
    assert code == 3 and "export this data with the CANN toolkit of that chip" in err


def test_missing_platform_version(prof):
    info = prof / "host" / "info.json"
    info.write_text(info.read_text().replace('"platform_version": "1", ', ""))
    export_fails(prof, ProfDirError, "info.json has no platform_version")


def test_other_format_version_warns_and_exports(prof):
    info = prof / "device_0" / "info.json.0"
    info.write_text(info.read_text().replace('"version": "1.0"', '"version": "2.5"'))
    before = snapshot(prof)
    res = run_export(prof, quiet=True)
    assert any('info.json.0: format version "2.5" differs from "1.0"' in w for w in res.warnings)
    assert any(f.name.startswith("op_summary") for f in res.files)
    assert snapshot(prof) == before


# --- damaged raw files -------------------------------------------------------------------

def _op_summary_rows(res) -> int:
    [f] = [f for f in res.files if f.name.startswith("op_summary")]
    return len(f.read_text().splitlines()) - 1


def test_truncated_tail_decodes_whole_records(prof):
    hw = data_file(prof, "hwts")
    hw.write_bytes(hw.read_bytes()[:-10])  # the last end record loses 10 bytes
    before = snapshot(prof)
    res = run_export(prof, quiet=True)
    assert f"{hw}: truncated tail, 54 bytes dropped (35 whole records of 64 bytes kept)" \
        in res.warnings
    assert any("1 task start/end records without a partner dropped" in w for w in res.warnings)
    assert _op_summary_rows(res) == GOLDEN_TASKS - 1
    assert snapshot(prof) == before


def test_bad_magic_records_skipped_and_counted(prof):
    api = data_file(prof, "api_event")
    raw = bytearray(api.read_bytes())
    raw[0:2] = b"\x00\x00"  # first api record
    raw[40:42] = b"\x12\x34"  # second one
    api.write_bytes(bytes(raw))
    data = load_prof(prof)
    assert f"{api}: 2 records with a bad magic number skipped" in data.log.warnings
    assert data.log.bad_records == 2


def _rewrite(path: Path, dtype: np.dtype, edit) -> None:
    arr = np.fromfile(path, dtype=dtype)
    edit(arr)
    arr.tofile(path)


def test_hwts_counter_out_of_sequence_skipped(prof):
    hw = data_file(prof, "hwts")
    # record 7 (an end record) gets a counter that fits neither neighbour: corrupt
    _rewrite(hw, L.HWTS, lambda a: a.__setitem__(7, a[7]["flags"] & 0x0F | (12 << 4)))
    log = rawread.DecodeLog()
    cols = rawread.device_records(hw.parent, "hwts", log, ["task_id"])
    assert len(cols["task_id"]) == 35
    assert f"{hw}: 1 hwts records with an out-of-sequence rolling counter skipped as " \
           "corrupt" in log.warnings
    assert log.bad_records == 1
    # the gap the skipped record leaves is reported too
    assert any("hwts rolling counter jumps at 1 places (at least 1 records missing" in w
               for w in log.warnings)
    res = run_export(prof, quiet=True)
    assert _op_summary_rows(res) == GOLDEN_TASKS - 1


def test_hwts_lost_records_reported_and_rest_kept(prof):
    hw = data_file(prof, "hwts")
    arr = np.fromfile(hw, dtype=L.HWTS)
    np.concatenate([arr[:10], arr[12:]]).tofile(hw)  # the device lost task 5's start+end
    log = rawread.DecodeLog()
    cols = rawread.device_records(hw.parent, "hwts", log, ["task_id"])
    assert len(cols["task_id"]) == 34  # nothing skipped: the records around the jump are fine
    assert log.bad_records == 0 and log.lost_records == 2
    assert f"{hw}: the hwts rolling counter jumps at 1 places (at least 2 records missing, " \
           "e.g. lost by the device or skipped as corrupt); the records around them are kept" \
        in log.warnings
    res = run_export(prof, quiet=True)
    assert _op_summary_rows(res) == GOLDEN_TASKS - 1


def test_hwts_undefined_log_type_skipped(prof):
    hw = data_file(prof, "hwts")
    _rewrite(hw, L.HWTS, lambda a: a.__setitem__(3, a[3]["flags"] & 0xF0 | 6))
    log = rawread.DecodeLog()
    cols = rawread.device_records(hw.parent, "hwts", log, ["task_id"])
    assert len(cols["task_id"]) == 35
    assert f"{hw}: 1 hwts records with an undefined log type skipped as corrupt" in log.warnings


def test_aicore_counter_out_of_sequence_skipped(prof):
    ac = data_file(prof, "aicore")
    _rewrite(ac, L.AICORE, lambda a: a.__setitem__(5, a[5]["flags"] & 0x0F | (0 << 4)))
    log = rawread.DecodeLog()
    cols = rawread.device_records(ac.parent, "aicore", log, ["task_id"])
    assert len(cols["task_id"]) == 17
    assert f"{ac}: 1 aicore records with an out-of-sequence rolling counter skipped as " \
           "corrupt" in log.warnings
    before = snapshot(prof)
    res = run_export(prof, quiet=True)
    assert _op_summary_rows(res) == GOLDEN_TASKS  # the task stays, its PMU cells are N/A
    assert snapshot(prof) == before


def test_unreadable_raw_file_mocked(prof, monkeypatch, capsys):
    """Tests run as root (permissions do not apply), so the denial is simulated."""
    hw = data_file(prof, "hwts")

    real_open = os.open

    def deny(path, *a, **k):  # raw files are opened by descriptor (O_NOFOLLOW, fstat)
        if isinstance(path, (str, Path)) and Path(path) == hw:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(rawread.os, "open", deny)
    before = snapshot(prof)
    with pytest.raises(RawDataError) as exc:
        run_export(prof, quiet=True)
    assert str(exc.value).startswith(f"{hw}: cannot read the raw data file (Permission "
                                     f"denied). Run the export as the user who collected")
    code, err = cli(capsys, "export", "--output", str(prof))
    assert code == 4 and "chmod u+r" in err
    assert snapshot(prof) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="running as root: file permissions are not "
                    "enforced for root, see test_unreadable_raw_file_mocked")
def test_unreadable_raw_file_real(prof):
    hw = data_file(prof, "hwts")
    hw.chmod(0)
    with pytest.raises(RawDataError, match="Permission denied"):
        run_export(prof, quiet=True)


def test_unreadable_control_file_mocked(prof, monkeypatch):
    real_open = os.open
    start = prof / "device_0" / "start_info.0"

    def deny(path, *a, **k):
        if Path(path) == start:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(os, "open", deny)
    with pytest.raises(ProfDirError, match=r"start_info\.0: unreadable control file "
                                           r"\(Permission denied\)"):
        run_export(prof, quiet=True)


# --- disk full while writing -------------------------------------------------------------

class _FullDisk:
    """A text file whose writes fail with ENOSPC once `room` characters were written."""

    def __init__(self, fh, room: int) -> None:
        self.fh, self.room = fh, room

    def write(self, text: str) -> int:
        if len(text) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(text)
        return self.fh.write(text)

    def close(self) -> None:
        self.fh.close()

    def __enter__(self) -> "_FullDisk":
        return self

    def __exit__(self, *exc) -> None:
        self.fh.close()

    def __getattr__(self, name):
        return getattr(self.fh, name)


def _outputs(prof: Path) -> list[Path]:
    return [p for d in ("device_0/summary", "device_0/timeline") for p in
            (prof / d).glob("*") if (prof / d).is_dir()]


@pytest.mark.parametrize("room", [0, 3000])
def test_disk_full_while_writing(prof, monkeypatch, capsys, room):
    real_open = open
    for module in (files, writers):  # the atomic files' writes, the streams' appends
        monkeypatch.setattr(module, "open",
                            lambda *a, **k: _FullDisk(real_open(*a, **k), room), raising=False)
    before = snapshot(prof)
    with pytest.raises(ExportError) as exc:
        run_export(prof, quiet=True)
    msg = str(exc.value)
    assert msg.startswith("cannot write ") and ": the disk (or quota) is full. Free space on " \
        "that file system and run the export again. No partial file was left under that " \
        "name; the raw data is unchanged." in msg
    # no temporary file, and no partial file under a final name: a file that parallel jobs
    # completed before the failure stopped the export is whole (equal to the rerun's)
    left = {p: p.read_bytes() for p in _outputs(prof)}
    assert not [p for p in left if ".tmp" in p.name]
    assert snapshot(prof) == before
    code, err = cli(capsys, "export", "--output", str(prof))
    assert code == 5 and "the disk (or quota) is full" in err
    monkeypatch.undo()
    assert run_export(prof, quiet=True).files  # space freed: the rerun succeeds
    for p, content in left.items():
        assert p.read_bytes() == content, p


def test_disk_full_on_a_real_tiny_tmpfs(tmp_path):
    """A real ENOSPC: the PROF dir on a 1 MiB tmpfs (skipped when mounting is not allowed)."""
    import shutil
    import subprocess

    mnt = tmp_path / "tiny"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")
    try:
        src = golden(tmp_path / "src")
        prof = mnt / src.name
        shutil.copytree(src, prof)
        filler = mnt / "filler"
        free = shutil.disk_usage(mnt).free
        filler.write_bytes(b"\0" * max(0, free - 12 * 1024))  # leave 12 KiB
        before = snapshot(prof)
        with pytest.raises(ExportError, match="the disk \\(or quota\\) is full"):
            run_export(prof, quiet=True)
        for p in _outputs(prof):  # complete files only, no temporary leftovers
            assert not p.name.startswith(".")
        assert snapshot(prof) == before
        filler.unlink()
        assert run_export(prof, quiet=True).files
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


@pytest.mark.parametrize("text,message", [
    (r'{"output": "/tmp/a\u0000b", "training_trace": "on"}', "contains a NUL character"),
    ("[" * 60000 + "]" * 60000, "nested too deeply"),
    ('{"storage_limit": ' + "9" * 5000 + "}", "more than 4300 digits"),
])
def test_hostile_profiling_options_get_the_validators_message(text, message):
    """Each gets the validator's message; each used to escape as a Python exception
    (ValueError 'embedded null byte', RecursionError, the int-digits ValueError)."""
    from msprof_cli.errors import OptionsError
    from msprof_cli.options import config_from_env

    with pytest.raises(OptionsError, match=message):
        config_from_env({"PROFILING_MODE": "true", "PROFILING_OPTIONS": text})


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0
                    or not __import__("shutil").which("setpriv"),
                    reason="needs root to run msprof as another user (setpriv)")
@pytest.mark.parametrize("sub", ["export", "query"])
def test_an_unreadable_prof_dir_is_a_message_not_a_traceback(tmp_path, sub):
    """Another user's PROF dir under a directory we may not search gives a message, not a
    traceback."""
    import shutil
    import subprocess
    import sys

    src = golden(tmp_path / "src")
    locked = tmp_path / "locked"
    locked.mkdir()
    shutil.move(str(src), locked / src.name)
    locked.chmod(0o700)  # root's: 'nobody' can neither list nor search it
    for p in (tmp_path, tmp_path.parent, tmp_path.parent.parent):
        p.chmod(p.stat().st_mode | 0o005)
    target = locked / src.name if sub == "export" else locked
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
    probe = subprocess.run([*as_nobody, "-c", "import msprof_cli.cli.main, numpy, pandas"],
                           capture_output=True, text=True, env=env, cwd="/")
    if probe.returncode != 0:
        # the repository or its venv lies in a directory 'nobody' cannot search (a 0700
        # home or mktemp -d): the test cannot run msprof as another user from here
        pytest.skip("'nobody' cannot run this checkout's Python or import msprof_cli (the "
                    "repository lies in a private directory): "
                    + (probe.stderr.strip().splitlines() or ["?"])[-1][:200])
    run = subprocess.run([*as_nobody, "-c", "from msprof_cli.cli.main import main; main()",
                          sub, "--output", str(target)], capture_output=True, text=True, env=env,
                         cwd="/")
    assert run.returncode != 0
    assert "Traceback" not in run.stderr
    assert "ermission" in run.stderr or "not readable" in run.stderr


def test_a_prof_dir_of_empty_data_files_is_refused(tmp_path, capsys):
    """A PROF dir whose data files are all empty is refused: it used to end in "done",
    exit 0, one advice file and no word."""
    prof = golden(tmp_path)
    for p in [*prof.glob("host/data/*"), *prof.glob("device_*/data/*")]:
        p.write_bytes(b"")
    before = snapshot(prof)
    with pytest.raises(SystemExit) as exc:
        main(["export", "--output", str(prof)])
    assert exc.value.code == ProfDirError.exit_code
    assert "holds only empty data files" in capsys.readouterr().err
    assert snapshot(prof) == before
    assert not list(prof.glob("device_*/summary"))


def test_a_sparse_raw_slice_is_refused_before_decoding(prof):
    """A 100 GiB sparse hwts slice (no disk used) was decoded, peaking at
    18.9 GB; it is now refused up front, naming the file and its sizes."""
    hw = data_file(prof, "hwts")
    os.chmod(hw, 0o644)
    os.truncate(hw, 8 << 30)
    if os.stat(hw).st_blocks * 512 >= 4 << 30:
        pytest.skip("this file system does not keep holes")
    before = os.stat(hw)
    with pytest.raises(RawDataError, match=r"declares 8\.0 GiB but holds only .* sparse"):
        run_export(prof, quiet=True)
    after = os.stat(hw)  # (no sha256 of 8 GiB of holes: size and mtime say it is untouched)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert not list(prof.glob("device_*/summary"))


def _ok(args: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 0


def test_export_takes_the_prof_dir_as_its_argument_too(tmp_path, capsys):
    prof = golden(tmp_path)
    _ok(["export", str(prof), "--advice", "off"])
    assert list((prof / "device_0" / "summary").glob("op_summary_*.csv"))
    _ok(["query", str(prof)])
    with pytest.raises(SystemExit) as exc:
        main(["export", str(prof), "--output", str(tmp_path)])
    assert exc.value.code != 0 and "Two directories given" in capsys.readouterr().err


def test_export_of_a_dir_with_prof_dirs_deeper_below_is_refused(tmp_path, capsys):
    """`msprof export --output /tmp` used to export every PROF dir two levels below (other
    users' and other runs' collections): only a PROF dir or a directory directly holding
    PROF dirs is exported; deeper ones are listed with the command for each."""
    prof = golden(tmp_path / "runs" / "a")
    before = snapshot(prof)
    with pytest.raises(SystemExit) as exc:
        main(["export", "--output", str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == ProfDirError.exit_code
    assert "holds none directly" in err and f"msprof export --output {prof}" in err
    assert snapshot(prof) == before  # nothing written
    _ok(["export", "--output", str(prof.parent), "--advice", "off"])  # its direct parent
    assert list((prof / "device_0" / "summary").glob("op_summary_*.csv"))
