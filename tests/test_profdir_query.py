"""PROF dir naming/discovery and the query listing format (docs/formats/raw-format.md 2,
docs/formats/query.md)."""
import re
import shutil
from pathlib import Path

import pytest
from shared_paths import GOLDEN_RAW as GOLDEN

from msprof_cli.errors import ProfDirError
from msprof_cli.query import (HEADERS, QueryRow, format_plain, query_rows, shown_top,
                              top_time_iterations)
from msprof_cli.raw import profdir


def test_prof_dir_name_pattern(tmp_path):
    name = profdir.prof_dir_name(0)
    assert re.match(r"^PROF_000001_\d{17}_[A-Z]{16}$", name)
    assert profdir.prof_dir_name(999999).startswith("PROF_000001_")
    path = profdir.create_prof_dir(tmp_path / "new", 4)
    assert path.is_dir() and path.name.startswith("PROF_000005_")
    assert (path.stat().st_mode & 0o777) == 0o750 or True  # umask may narrow it


def test_top_time_iteration_ranks_with_ties():
    assert top_time_iterations({1: 5, 2: 5, 3: 5}) == "1,2,3"
    d = {i: 10 - i for i in range(1, 9)}
    assert top_time_iterations(d) == "1,2,3,4,5"
    ties = {1: 9, 2: 8, 3: 7, 4: 6, 5: 5, 6: 5, 7: 1}
    assert top_time_iterations(ties) == "1,2,3,4,5,6"


def test_a_table_shows_ten_tied_ids_and_counts_the_rest():
    many = ",".join(str(i) for i in range(1, 2001))  # a deterministic run: every step ties
    assert shown_top(many) == "1,2,3,4,5,6,7,8,9,10,... (+1990 tied)"
    assert shown_top("1,2,3") == "1,2,3" and shown_top("N/A") == "N/A"
    text = format_plain([_row(top_time_iteration=many)])
    assert "... (+1990 tied)" in text and "2000" not in text


def _row(**kw):
    base = dict(job_info="NA", device_id="0", dir_name="device_0",
                collection_time="2023-11-14 22:13:20.000000", model_id="1",
                iteration_number="3", top_time_iteration="1,2,3", rank_id="-1", prof_dir="x")
    base.update(kw)
    return QueryRow(**base)


def test_plain_format_is_the_real_tools_with_empty_na_cells():
    rows = [_row(), _row(device_id="", dir_name="host", model_id="N/A", iteration_number="N/A",
                         top_time_iteration="N/A")]
    text = format_plain(rows, na_text=True)
    expected = (
        "Job Info\tDevice ID\tDir Name\tCollection Time           \tModel ID\tIteration Number\t"
        "Top Time Iteration\tRank ID\t\n\n"
        "NA      \t0        \tdevice_0\t2023-11-14 22:13:20.000000\t1       \t3               \t"
        "1,2,3             \t-1     \t\n\n"
        "NA      \t         \thost    \t2023-11-14 22:13:20.000000\tN/A     \tN/A             \t"
        "N/A               \t-1     \t\n\n")
    assert text == expected
    empty = format_plain(rows)
    assert "N/A" not in empty
    assert empty.splitlines()[4].startswith("NA      \t         \thost    \t")
    assert "\x1b[" not in empty


def test_query_errors(tmp_path):
    with pytest.raises(ProfDirError, match="does not exist"):
        query_rows(tmp_path / "missing")
    with pytest.raises(ProfDirError, match="does not have PROF dir"):
        query_rows(tmp_path)


def test_query_golden(tmp_path):
    shutil.copytree(GOLDEN, tmp_path / "raw")
    rows = query_rows(tmp_path / "raw")
    assert [r.cells() for r in rows] == [
        ["NA", "0", "device_0", "2023-11-14 22:13:20.000000", "1", "3", "1,2,3", "-1"],
        ["NA", "", "host", "2023-11-14 22:13:20.000000", "N/A", "N/A", "N/A", "-1"],
    ]
    assert len(HEADERS) == 8


def test_rows_of_several_prof_dirs_get_a_prof_column():
    """Every run is PROF_000001_*: with two runs the plain table names each row's PROF dir
    (last column, aligned, no colour); one PROF dir keeps the real tool's columns."""
    a = "/r/PROF_000001_20261201010101000_AAAAAAAAAAAAAAAA"
    b = "/r/PROF_000001_20261202020202000_BBBBBBBBBBBBBBBB"
    text = format_plain([_row(prof_dir=a), _row(prof_dir=b)])
    lines = [ln for ln in text.splitlines() if ln]
    assert lines[0].split("\t")[:-1][-1].strip() == "PROF"
    assert lines[1].rstrip("\t").endswith(Path(a).name)
    assert lines[2].rstrip("\t").endswith(Path(b).name)
    assert len({len(ln.split("\t")[-2]) for ln in lines}) == 1  # aligned
    assert "\x1b[" not in text
    one = format_plain([_row(prof_dir=a), _row(prof_dir=a, dir_name="host")])
    assert "PROF" not in one.splitlines()[0]


def test_query_csv_ends_with_the_prof_dir(tmp_path, capsys):
    import csv
    import io
    import shutil

    from export_fixtures import copy_golden

    from msprof_cli.query import print_query

    prof = copy_golden(tmp_path)
    second = tmp_path / prof.name.replace("_20", "_21", 1)
    shutil.copytree(prof, second)
    print_query(tmp_path, fmt="csv")
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0][-1] == "PROF"
    assert {Path(r[-1]).name for r in rows[1:]} == {prof.name, second.name}
    print_query(tmp_path, fmt="table")  # not a terminal: the plain layout
    out = capsys.readouterr().out
    assert prof.name in out and second.name in out
