"""msprof report: reports of real collections (the frozen corpus: one device, two
devices with HCCL, with and without PMU, a diff) carry the summary's numbers, and load in
headless Chromium from a file URL with every plot drawn and no script error."""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from msprof_cli.summary.inputs import load
from msprof_cli.summary.units import us

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import build as corpus  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                "--virtual-time-budget=15000"]
SHOTS = Path(os.environ.get("MSPROF_REPORT_SHOTS", "")) if os.environ.get(
    "MSPROF_REPORT_SHOTS") else None


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, Path]:
    keep = {"oracle_keras_bn", "two_devices_hccl", "pmu_off_device_1", "oracle_tf1_aicpu"}
    return {k: v for k, v in corpus.unpack(tmp_path_factory.mktemp("rep_raw")).items()
            if k in keep}


def msprof(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msprof_cli", *args], capture_output=True,
                          text=True, timeout=300)


def figures(page: str) -> dict[str, dict]:
    """{plot title: figure} of a report (its FIGS JSON and the titles above the divs)."""
    figs = json.loads(re.search(r"const FIGS=(\[.*?\]);", page, re.S).group(1)
                      .replace("<\\/", "</"))
    titles = dict((fid, html.unescape(t)) for t, fid in re.findall(r'<h3>([^<]*)</h3><div id="(fig\d+)"',
                                                    page))
    return {titles[f["id"]]: f["fig"] for f in figs}


@pytest.fixture(scope="module")
def reports(cases, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("reports")
    made = {}
    for name, args in (("one", [str(cases["oracle_keras_bn"])]),
                       ("hccl", [str(cases["two_devices_hccl"])]),
                       ("nopmu", [str(cases["pmu_off_device_1"])]),
                       ("diff", [str(cases["oracle_tf1_aicpu"]), "--baseline",
                                 str(cases["oracle_keras_bn"])])):
        path = out / f"{name}.html"
        r = msprof("report", *args, "-o", str(path))
        assert r.returncode == 0, r.stderr
        assert "Report written to" in r.stdout
        made[name] = path
    return made


def test_report_numbers_are_the_summarys(cases, reports) -> None:
    s = load(cases["oracle_keras_bn"])
    page = reports["one"].read_text()
    assert "cdn" not in page.lower().split("<script>")[0]  # no remote resource
    assert not re.search(r'<script[^>]+src=|<link[^>]+href="http', page)
    figs = figures(page)
    dev = s.devices[0]
    m = next(m for m in dev.models if m.model_id is not None)
    title = f'Top op types, device 0, model {m.model_id} "{m.name}"'
    fig = figs[title]["data"][0]
    top = m.op_types[:15][::-1]
    assert fig["x"] == [t.per_step_us for t in top]
    assert fig["y"] == [f"{t.op_type} ({t.task_type})" for t in top]
    [steps] = [f["data"] for t, f in figs.items()
               if t.startswith(f'Step time, device 0, model {m.model_id} "{m.name}"')]
    fpbp = next(t for t in steps if t["name"] == "FP to BP (device)")
    assert fpbp["x"] == m.steps.iteration_id and fpbp["y"] == m.steps.fp_bp
    assert f"<b>{us(m.iteration_time.median)}</b><span>Iteration Time, median" in page
    assert any(t.startswith("AI Core pipe ratios") for t in figs)  # PMU data: pipes drawn
    for line in dev.advice:  # the advice as text
        assert line.split(": ", 1)[0] in page
    assert reports["one"].stat().st_size < 6_000_000


def test_two_devices_show_activity_and_overlap(cases, reports) -> None:
    s = load(cases["two_devices_hccl"])
    figs = figures(reports["hccl"].read_text())
    heat = figs["Device activity per stream (minimap)"]["data"][0]
    assert len(heat["z"]) == sum(len(d.activity.streams) for d in s.devices)
    assert heat["z"][0] == s.devices[0].activity.busy[0]
    bars = figs["Communication vs compute per device"]["data"]
    exposed = next(b for b in bars if b["name"] == "communication not overlapped")["y"]
    want = [round(d.overlap.communication_us - d.overlap.overlapped_us, 6) for d in s.devices]
    assert [round(v, 6) for v in exposed] == want and all(v >= 0 for v in exposed)


def test_without_pmu_there_is_no_pipe_plot_for_that_device(reports) -> None:
    figs = figures(reports["nopmu"].read_text())
    pipes = [t for t in figs if t.startswith("AI Core pipe ratios")]
    assert pipes and all("device 0" in t for t in pipes)  # device 1 was collected without PMU


def test_diff_view(cases, reports) -> None:
    page = reports["diff"].read_text()
    assert "Against the baseline" in page and "Changed ops" in page
    assert any(t.startswith("Op type changes against the baseline") for t in figures(page))


def test_bad_baseline_is_refused_with_exit_2(cases, tmp_path: Path) -> None:
    bad = tmp_path / "b.json"
    bad.write_text("{")
    r = msprof("report", str(cases["oracle_keras_bn"]), "--baseline", str(bad), "-o",
               str(tmp_path / "r.html"))
    assert r.returncode == 2 and "baseline:" in r.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get "
                    "install chromium; .ci/run installs it): the browser test cannot run")
@pytest.mark.parametrize("name", ["hccl", "diff"])  # two devices + PMU; the diff view
def test_report_loads_in_chromium(reports, name, tmp_path: Path) -> None:
    page = reports[name]
    flags = [*CHROME_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    r = subprocess.run([CHROMIUM, *flags, "--enable-logging=stderr", "--v=0", "--dump-dom",
                        page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    body = re.search(r"<body([^>]*)>", r.stdout)
    assert body, r.stderr[-2000:]
    attrs = dict(re.findall(r'data-(\w+)="(\d+)"', body.group(1)))
    assert int(attrs["plots"]) >= 3
    assert attrs["drawn"] == attrs["plots"] == attrs["nonempty"], attrs
    assert attrs["errors"] == "0"
    console = [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln and "ERROR" in ln.upper()]
    assert not console, console
    shot = (SHOTS or tmp_path) / f"report_{name}.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([CHROMIUM, *flags, "--window-size=1400,2400", f"--screenshot={shot}",
                    page.resolve().as_uri()], capture_output=True, timeout=120)
    assert shot.stat().st_size > 50_000  # a page with plots, not a blank one
