"""Names the profiled program chose never drive a terminal or a spreadsheet:
formula leads (= + - @ TAB CR) are neutralised in every CSV, control characters (ESC, OSC,
C1) are escaped in CSVs, the query and the console advice."""
from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest
from export_fixtures import copy_golden

from msprof_cli.export.api import run_export
from msprof_cli.export.sinks.files import SliceNamer
from msprof_cli.export.sinks.writers import write_csv
from msprof_cli.query import print_query
from msprof_cli.textsafety import escape_controls, safe_cell

EVIL = "Conv2D\x1b]0;pwned\x07\x9b31m"


@pytest.mark.parametrize("cell,want", [
    ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
    ("\t=1+1", "'\t=1+1"),
    ("\r=1+1", "'\r=1+1"),
    ("@SUM(A1)", "'@SUM(A1)"),
    ("-1", "-1"), ("-0.5", "-0.5"), ("+1e-05", "+1e-05"), ("123.456\t", "123.456\t"),
    ("MatMul", "MatMul"),
    ("a\x1b[31mb", "a\\x1b[31mb"),
    ("\x1b=x", "\\x1b=x"),
])
def test_safe_cell(cell, want):
    assert safe_cell(cell) == want


def test_controls_are_escaped_but_text_layout_is_kept():
    assert escape_controls("a\tb\nc\r\x00\x7f\x85") == "a\tb\nc\r\\x00\\x7f\\x85"
    assert escape_controls("算子 ü") == "算子 ü"


def test_csv_writer_neutralises_tab_and_cr_leads_and_escapes_controls(tmp_path):
    df = pd.DataFrame({"Op Name": ["\t=HYPERLINK(\"x\")", "\r=1", "op\x1b[2J", "-2"],
                       "Time": ["1.000\t", "2.000\t", "3.000\t", "4.000\t"]})
    [path] = write_csv(SliceNamer(tmp_path, "t", "", "csv"), ["Op Name", "Time"], df, 100)
    text = path.read_bytes().decode()
    assert "\x1b" not in text
    rows = list(csv.reader(io.StringIO(text)))[1:]
    assert [r[0] for r in rows] == ["'\t=HYPERLINK(\"x\")", "'\r=1", "op\\x1b[2J", "-2"]
    assert [r[1] for r in rows] == ["1.000\t", "2.000\t", "3.000\t", "4.000\t"]


def test_a_hostile_op_name_reaches_no_file_and_no_console_raw(tmp_path, capsys):
    prof = copy_golden(tmp_path)
    dic = next((prof / "host" / "data").glob("*hash_dic*"))
    dic.write_text(dic.read_text().replace(":Conv2D\n", f":{EVIL}\n"))
    run_export(prof, advice="full")
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x9b" not in out
    csvs = list(prof.glob("device_*/summary/*.csv"))
    assert csvs
    texts = {p.name: p.read_text() for p in csvs}
    assert not [n for n, t in texts.items() if "\x1b" in t or "\x9b" in t or "\x07" in t]
    assert any("Conv2D\\x1b]0;pwned\\x07\\x9b31m" in t for t in texts.values())
    # JSON outputs escape controls by the JSON rules; they must still parse
    for p in prof.glob("device_*/timeline/*.json"):
        json.loads(p.read_text())


def test_query_csv_neutralises_a_formula_job_info(tmp_path, capsys):
    prof = copy_golden(tmp_path)
    info = next(prof.glob("device_*/info.json.*"))
    meta = json.loads(info.read_text())
    meta["jobInfo"] = "=cmd|' /C calc'!A0"
    info.write_text(json.dumps(meta))
    print_query(tmp_path, fmt="csv")
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    col = rows[0].index("Job Info")
    assert rows[1][col] == "'=cmd|' /C calc'!A0"


def test_csv_scan_equals_the_character_scans():
    """writers.scan_csv (byte scans) finds exactly what the substring
    formula check and the control-character regex find, non-ASCII and surrogates included."""
    import random

    from msprof_cli.export.sinks.writers import maybe_formula, scan_csv
    from msprof_cli.textsafety import CONTROL_RE

    alphabet = list(',\n\r\t"=+-@a1 .\x00\x1b\x7f\x85\x9fµ算') + ["\ud800"]
    rng = random.Random(7)
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(13)))
        assert scan_csv(text) == (maybe_formula(text), CONTROL_RE.search(text) is not None), \
            repr(text)


def test_a_hostile_model_name_reaches_no_console_raw(tmp_path, capsys):
    """The export's own lines (the model it chose, warnings) carry names from the raw data
    too: escaped like the rest."""
    from test_device_records import make_chunk, run

    chunk = make_chunk(2)
    chunk.models[1].name = EVIL
    prof = run(tmp_path, [chunk])
    run_export(prof, advice="brief")
    got = capsys.readouterr()
    assert "Conv2D\\x1b]0;pwned" in got.out  # the model line names it, escaped
    for text in (got.out, got.err):
        assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text
