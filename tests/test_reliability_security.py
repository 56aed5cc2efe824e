"""Security: file modes, no writing through links or into other users' directories,
hostile PROF dirs (links out, `..` names, huge sizes, deep JSON, non-UTF-8 names) and CSV
formula injection; output-directory checks of the options and the collect command line."""
from __future__ import annotations

import csv
import errno
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from msprof_cli.cli.main import main
from msprof_cli.errors import ExportError, OptionsError, ProfDirError, RawDataError
from msprof_cli.export.api import run_export
from msprof_cli.export.decode import rawread
from msprof_cli.export.decode.dataset import load_prof
from msprof_cli.export.sinks.writers import neutralise_formulas
from msprof_cli.options import check_output_dir
from msprof_cli.raw import layouts as L
from tests.reliability_fixtures import data_file, golden, snapshot


@pytest.fixture
def prof(tmp_path: Path) -> Path:
    return golden(tmp_path / "in")


def tree(root: Path) -> dict[str, bytes]:
    """Every file below `root` (links not followed) with its content."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = b"<link>" if p.is_symlink() else p.read_bytes()
    return out


# --- modes ------------------------------------------------------------------------------

@pytest.mark.parametrize("umask", [0o000, 0o077])
def test_output_files_0640_and_dirs_0750(prof, umask):
    old = os.umask(umask)
    try:
        res = run_export(prof, quiet=True)
        ms = run_export(prof, layout="mindstudio", quiet=True)
    finally:
        os.umask(old)
    for f in res.files + ms.files:
        assert f.stat().st_mode & 0o777 == 0o640, f
    for d in ("device_0/summary", "device_0/timeline", "mindstudio_profiler_output"):
        assert (prof / d).stat().st_mode & 0o777 == 0o750, d


def test_existing_directories_keep_their_mode(prof):
    (prof / "device_0" / "summary").mkdir(mode=0o700)
    os.chmod(prof / "device_0" / "summary", 0o700)
    run_export(prof, quiet=True)
    assert (prof / "device_0" / "summary").stat().st_mode & 0o777 == 0o700


# --- symlinks and ownership of output directories ---------------------------------------

def test_output_dir_symlink_refused(prof, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (prof / "device_0" / "summary").symlink_to(outside)
    before = snapshot(prof)
    with pytest.raises(ExportError) as exc:
        run_export(prof, quiet=True)
    assert str(exc.value) == (f"{prof / 'device_0' / 'summary'} is a symbolic link; msprof "
                              "never writes through links. Remove the link (a real directory "
                              "is created in its place).")
    assert list(outside.iterdir()) == []
    assert snapshot(prof) == before


def test_final_name_symlink_is_replaced_not_followed(prof, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    summary = prof / "device_0" / "summary"
    summary.mkdir()
    (summary / "op_summary_0_1_1_3.csv").symlink_to(victim)
    run_export(prof, quiet=True)
    assert victim.read_text() == "precious"
    assert not (summary / "op_summary_0_1_1_3.csv").is_symlink()


def test_output_dir_of_another_user_refused(prof, monkeypatch):
    summary = prof / "device_0" / "summary"
    summary.mkdir()
    os.chown(summary, 12345, 12345)
    assert run_export(prof, quiet=True).files  # root may write anywhere (msprof-analyze rule)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    os.chown(summary, 12345, 12345)
    with pytest.raises(ExportError, match=r"summary belongs to another user \(uid 12345\); "
                                          r"msprof refuses to write into it"):
        run_export(prof, quiet=True)


def test_output_dir_that_is_a_file(prof):
    (prof / "device_0" / "timeline").write_text("not a dir")
    with pytest.raises(ExportError, match="timeline"):
        run_export(prof, quiet=True)
    assert (prof / "device_0" / "timeline").read_text() == "not a dir"


# --- hostile PROF dirs ------------------------------------------------------------------

def test_symlinked_data_dir_and_files_not_followed(prof, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    hw = data_file(prof, "hwts")
    (outside / hw.name).write_bytes(hw.read_bytes())
    (outside / "secret").write_text("secret")
    # a slice that is a link out of the PROF dir is ignored, with a warning
    extra = hw.parent / "hwts.data.0.slice_1"
    extra.symlink_to(outside / hw.name)
    res = run_export(prof, quiet=True)
    assert any("symbolic links ignored (never followed): hwts.data.0.slice_1" in w
               for w in res.warnings)
    rows = (prof / "device_0/summary/op_summary_0_1_1_3.csv").read_text().splitlines()
    assert len(rows) == 1 + 18  # the linked copy was not decoded
    # a whole data dir that is a link is refused
    host_data = prof / "host" / "data"
    os.rename(host_data, outside / "hostdata")
    host_data.symlink_to(outside / "hostdata")
    data = load_prof(prof)
    assert any(w.startswith(f"{host_data} is a symbolic link; refused") for w in data.log.warnings)
    assert tree(outside)["secret"] == b"secret"


def test_symlinked_control_file_refused(prof, tmp_path):
    outside = tmp_path / "outside.json"
    info = prof / "device_0" / "info.json.0"
    outside.write_bytes(info.read_bytes())
    info.unlink()
    info.symlink_to(outside)
    with pytest.raises(ProfDirError, match=r"info\.json\.0 is a symbolic link; control files "
                                           r"are never read through links"):
        run_export(prof, quiet=True)


def test_symlinked_result_dir_is_not_exported_into(prof, tmp_path):
    outside = tmp_path / "outside"
    import shutil

    shutil.copytree(prof / "device_0", outside / "device_1")
    (prof / "device_1").symlink_to(outside / "device_1")
    before = tree(outside)
    # refused with a message (it used to be skipped without a word)
    from msprof_cli.errors import ProfDirError
    for layout in ("mindstudio", "legacy"):
        with pytest.raises(ProfDirError, match="device_1 is a symbolic link"):
            run_export(prof, layout=layout, quiet=True)
    assert tree(outside) == before


def test_dot_dot_names_in_control_files_stay_inside(prof, tmp_path):
    for name in ("device_0/sample.json", "host/sample.json"):
        p = prof / name
        p.write_text(p.read_text().replace('"result_dir": "', '"result_dir": "../../../escape/'))
    info = prof / "device_0" / "info.json.0"
    info.write_text(info.read_text().replace('"devices": "0"', '"devices": "../../../escape"')
                    .replace('"pid": "4242"', '"pid": "../../escape"')
                    .replace('"jobInfo": "NA"', '"jobInfo": "../../escape"'))
    hd = data_file(prof, "hash_dic")
    hd.write_bytes(hd.read_bytes().replace(b":Conv2D_1", b":../../../escape/Conv2D_1"))
    before = tree(tmp_path)
    res = run_export(prof, quiet=True)
    res2 = run_export(prof, layout="mindstudio", quiet=True)
    after = tree(tmp_path)
    new = set(after) - set(before)
    assert new and all(n.startswith(f"in/{prof.name}/") for n in new)
    assert all(prof in f.parents for f in res.files + res2.files)
    assert not (tmp_path / "escape").exists()


def test_huge_declared_size_refused_before_reading(prof):
    hw = data_file(prof, "hwts")
    with open(hw, "r+b") as fh:  # sparse: 1 TiB declared, nothing stored
        fh.truncate(1 << 40)
    before_size = hw.stat().st_size
    with pytest.raises(RawDataError) as exc:
        run_export(prof, quiet=True)
    msg = str(exc.value)  # refused as a sparse file, before the memory guard
    assert "declares 1024.0 GiB but holds only" in msg and "(a sparse file)" in msg
    assert hw.stat().st_size == before_size


def test_memory_guard_uses_available_memory(prof, monkeypatch):
    monkeypatch.setattr(rawread, "available_memory", lambda: 1000)
    with pytest.raises(RawDataError, match="needs about 0.0 GiB of memory, but only 0.0 GiB"):
        load_prof(prof)


def test_huge_tensor_num_is_clipped(prof):
    ti = prof / "host" / "data" / "unaging.additional.tensor_info.slice_0"
    arr = np.fromfile(ti, dtype=L.TENSOR_INFO)
    arr["tensor_num"] = 0xFFFFFFFF
    arr.tofile(ti)
    assert run_export(prof, quiet=True).files


def test_huge_and_deep_control_files(prof):
    sample = prof / "device_0" / "sample.json"
    sample.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ProfDirError, match=r"unreadable control file \(JSON nested deeper "
                                           r"than 64 levels\)"):
        run_export(prof, quiet=True)
    sample.write_text('{"a": "' + "x" * (5 << 20) + '"}')
    with pytest.raises(ProfDirError, match=r"a control file is at most 4194304 bytes"):
        run_export(prof, quiet=True)


def test_non_utf8_names_in_hash_dic(prof):
    hd = data_file(prof, "hash_dic")
    hd.write_bytes(hd.read_bytes().replace(b":Conv2D_1\n", b":Conv\xff\xfe2D_1\n")
                   .replace(b"10000015838:", b"\xc3\xa9\xff:"))  # a key that is not a number
    res = run_export(prof, quiet=True)
    text = (prof / "device_0/summary/op_summary_0_1_1_3.csv").read_bytes().decode("utf-8")
    assert "Conv\ufffd\ufffd2D_1" in text
    assert any(f.name.startswith("op_summary") for f in res.files)


def test_huge_dictionary_refused(prof, monkeypatch):
    monkeypatch.setattr(rawread, "MAX_DICT_BYTES", 100)
    with pytest.raises(RawDataError, match=r"hash_dic files hold more than 0 MiB, which is not "
                                           r"a real name dictionary"):
        run_export(prof, quiet=True)


# --- CSV formula injection -----------------------------------------------------------------

def test_neutralise_formulas_text_only():
    df = pd.DataFrame({
        "name": ["=HYPERLINK(\"http://x\")", "+cmd|' /C calc'!A0", "-evil", "@SUM(1+1)", "ok",
                 "N/A", "a=b"],
        "num": ["-1", "-0.5", "-1e-05", "+3", "1700000000001031.000\t", "-inf", "0"],
    }, dtype=object)
    out = neutralise_formulas(df)
    assert list(out["name"]) == ["'=HYPERLINK(\"http://x\")", "'+cmd|' /C calc'!A0", "'-evil",
                                 "'@SUM(1+1)", "ok", "N/A", "a=b"]
    assert list(out["num"]) == list(df["num"])  # numbers never change
    clean = pd.DataFrame({"a": ["x", "-2"]}, dtype=object)
    assert neutralise_formulas(clean) is clean


def test_formula_op_names_neutralised_in_summaries(prof, tmp_path):
    base = golden(tmp_path / "base")
    run_export(base, quiet=True)
    hd = data_file(prof, "hash_dic")
    hd.write_bytes(hd.read_bytes().replace(b":Conv2D_1\n", b":=cmd|'/C calc'!A0\n")
                   .replace(b":Relu_3\n", b":-Relu_3\n").replace(b":MatMul_4\n", b":@MatMul_4\n")
                   .replace(b":Add_5\n", b":+Add_5\n"))
    run_export(prof, quiet=True)
    name = "device_0/summary/op_summary_0_1_1_3.csv"
    got = list(csv.reader((prof / name).open()))
    ref = list(csv.reader((base / name).open()))
    col = got[0].index("Op Name")
    fixed = {"Conv2D_1": "'=cmd|'/C calc'!A0", "Relu_3": "'-Relu_3", "MatMul_4": "'@MatMul_4",
             "Add_5": "'+Add_5"}
    for g, r in zip(got[1:], ref[1:]):
        assert g[col] == fixed.get(r[col], r[col])
        assert g[:col] + g[col + 1:] == r[:col] + r[col + 1:]  # every other cell identical


# --- options and collect command line ---------------------------------------------------

def test_check_output_dir(tmp_path, monkeypatch):
    new = tmp_path / "a" / "b"
    old = os.umask(0)
    try:
        check_output_dir(new)
    finally:
        os.umask(old)
    assert new.is_dir() and new.stat().st_mode & 0o777 == 0o750
    check_output_dir(new)  # exists: fine

    link = tmp_path / "link"
    link.symlink_to(new)
    with pytest.raises(OptionsError) as exc:
        check_output_dir(link)
    assert str(exc.value) == (f'The output path "{link}" is a symbolic link; msprof refuses '
                              f'symlinked output paths. Give the real directory: "{new}".')

    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(OptionsError, match=r'is a file, not a directory\. Give a directory'):
        check_output_dir(f)
    with pytest.raises(OptionsError, match=r'cannot be created: ".*/file" is a file'):
        check_output_dir(f / "sub")

    monkeypatch.setattr(os, "access", lambda p, mode: False)
    with pytest.raises(OptionsError, match=r'"[^"]+/b" is not writable\. Choose a directory'):
        check_output_dir(new)
    with pytest.raises(OptionsError, match=r'cannot be created: "[^"]+" is not writable'):
        check_output_dir(tmp_path / "c" / "d")
    monkeypatch.undo()

    other = tmp_path / "other"
    other.mkdir()
    os.chown(other, 12345, 12345)
    check_output_dir(other)  # root: allowed
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(OptionsError, match=r"belongs to another user \(uid 12345\)"):
        check_output_dir(other)
    os.chown(other, 0, 0)
    check_output_dir(other)  # directories of root (like /tmp) are trusted


def _cli(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return exc.value.code, capsys.readouterr().err


def test_collect_empty_command_after_dashes(capsys):
    code, err = _cli(capsys, "collect", "--")
    assert code == 2
    assert "no command to profile: put it after --, e.g. `msprof collect -- python " \
           "train.py`." in err


def test_collect_command_not_found(capsys, tmp_path):
    code, err = _cli(capsys, "collect", "--output", str(tmp_path), "--",
                     "no-such-command-msprof-test")
    assert code == 127
    assert "command not found: 'no-such-command-msprof-test' is not on PATH" in err
    code, err = _cli(capsys, "collect", "--output", str(tmp_path), "--", "./missing.py")
    assert code == 127 and "command not found: ./missing.py (no such file)" in err
    assert not list(tmp_path.glob("PROF_*"))


def test_enospc_message_names_the_file(prof, monkeypatch):
    """The OSError safety net of run_export (a failure outside the atomic writers)."""
    import msprof_cli.export.layouts.legacy as legacy

    def boom(*a, **k):
        raise OSError(errno.EIO, "Input/output error", str(prof / "x"))

    monkeypatch.setattr(legacy, "export_legacy", boom)
    with pytest.raises(ExportError, match=r"/x: Input/output error\. Check the permissions and "
                                          r"the free space of the PROF dir"):
        run_export(prof, quiet=True)


@pytest.mark.skipif(not hasattr(os, "lchown") or os.geteuid() != 0,
                    reason="needs root to give a symlink to another user")
def test_an_output_path_through_another_users_symlink_is_refused(tmp_path):
    """Every component of the output path is checked, not only the last: a link another
    user planted above the output directory (in /tmp, say) must not redirect the profile."""
    from msprof_cli.errors import OptionsError
    from msprof_cli.options import check_output_dir

    real = tmp_path / "theirs"
    real.mkdir()
    link = tmp_path / "planted"
    os.symlink(real, link)
    os.lchown(link, 65534, 65534)
    with pytest.raises(OptionsError, match="symbolic link .* of another user"):
        check_output_dir(link / "out")
    assert not (real / "out").exists()
    mine = tmp_path / "mine"
    os.symlink(real, mine)  # root's own link (like /home -> /data/home): followed
    check_output_dir(mine / "out")
    assert (real / "out").is_dir()


@pytest.mark.parametrize("link", ["device_0", "device_0/data", "host/data"])
def test_linked_result_or_data_dirs_are_refused(tmp_path, capsys, link):
    """A linked result or data dir is refused: it used to be warned about but still listed,
    and `device_0 -> /` exported nothing with exit 0 (query: 'import --cluster first!')."""
    import shutil

    from msprof_cli.cli.main import main
    from tests.reliability_fixtures import golden

    prof = golden(tmp_path / "g")
    target = prof / link
    outside = tmp_path / "outside"
    shutil.move(str(target), outside)
    os.symlink(outside if link != "device_0" else "/", target)
    for sub in ("export", "query"):
        with pytest.raises(SystemExit) as exc:
            main([sub, "--output", str(prof)])
        assert exc.value.code == 3
        err = capsys.readouterr().err
        assert "is a symbolic link" in err and "must not point outside itself" in err
    assert not list(prof.glob("*/summary")) and not (prof / "mindstudio_profiler_output").exists()


def test_a_raw_file_swapped_for_a_link_after_the_listing_is_not_followed(tmp_path):
    """The read opens the listed name with O_NOFOLLOW and checks the
    descriptor, so a link put in its place between listing and reading is refused."""
    from msprof_cli.errors import RawDataError
    from msprof_cli.export.decode import rawread
    from msprof_cli.raw import layouts as L

    secret = tmp_path / "secret"
    secret.write_bytes(b"\0" * 4096)
    slice_ = tmp_path / "hwts.data.0.slice_0"
    os.symlink(secret, slice_)
    with pytest.raises(RawDataError, match="symbolic link"):
        rawread.read_file(slice_, L.DEVICE_DTYPES["hwts"], rawread.DecodeLog())
    fifo = tmp_path / "hwts.data.0.slice_1"
    os.mkfifo(fifo)
    with pytest.raises(RawDataError, match="not a regular file"):
        rawread.read_file(fifo, L.DEVICE_DTYPES["hwts"], rawread.DecodeLog())


_LISTED: list[str] = []


def _audit(event: str, args: tuple) -> None:
    if event in ("os.listdir", "os.scandir") and args and "planted_target" in str(args[0]):
        _LISTED.append(str(args[0]))


def test_a_planted_summary_link_is_refused_before_anything_reads_through_it(tmp_path):
    """device_0/summary planted as a link to a directory elsewhere: refused, and the
    target is never listed (the failed export's clean-up used to glob through the link)."""
    import sys

    from export_fixtures import copy_golden

    prof = copy_golden(tmp_path)
    target = tmp_path / "planted_target"
    target.mkdir()
    (target / "theirs.csv").write_text("x\n")
    (prof / "device_0" / "summary").symlink_to(target)
    if _audit not in getattr(sys, "_msprof_test_hooks", []):
        sys.addaudithook(_audit)  # audit hooks cannot be removed: added once per process
        sys._msprof_test_hooks = [*getattr(sys, "_msprof_test_hooks", []), _audit]
    _LISTED.clear()
    with pytest.raises(ExportError, match="symbolic link"):
        run_export(prof, quiet=True)
    assert _LISTED == []
    assert sorted(p.name for p in target.iterdir()) == ["theirs.csv"]
