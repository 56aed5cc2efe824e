"""The `msprof` command line: help, version, error mapping, refusal before the script starts."""
import subprocess
import sys

import pytest

from msprof_cli import __version__

MSPROF = [sys.executable, "-m", "msprof_cli"]


def run(*args, **kw):
    return subprocess.run([*MSPROF, *args], capture_output=True, text=True, timeout=60, **kw)


def test_help_does_not_import_pandas_or_tensorflow():
    code = ("import sys; from msprof_cli.cli.main import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('pandas', 'tensorflow', 'rich', 'numpy') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("sub", ["collect", "export", "query"])
def test_every_subcommand_has_help(sub):
    res = run(sub, "--help")
    assert res.returncode == 0 and "Usage: msprof " + sub in res.stdout


def test_version():
    res = run("--version")
    assert res.returncode == 0 and __version__ in res.stdout


def test_collect_without_command():
    res = run("collect")
    assert res.returncode == 2
    assert "no command to profile" in res.stderr


def test_bad_option_refused_before_the_script_starts(tmp_path):
    marker = tmp_path / "ran"
    res = run("collect", "--aic-metrics", "Bogus", "--", sys.executable, "-c",
              f"open({str(marker)!r}, 'w')", cwd=tmp_path)
    assert res.returncode == 2
    assert '"Bogus"' in res.stderr and "PipeUtilization" in res.stderr
    assert not marker.exists()


def test_bad_output_path_refused(tmp_path):
    res = run("collect", "--output", "a\tb", "--", sys.executable, "-c", "pass", cwd=tmp_path)
    assert res.returncode == 2 and "forbidden character" in res.stderr


def test_bad_storage_limit_refused(tmp_path):
    res = run("collect", "--storage-limit", "10MB", "--", sys.executable, "-c", "pass",
              cwd=tmp_path)
    assert res.returncode == 2 and "storage_limit" in res.stderr


def test_export_and_query_on_missing_path(tmp_path):
    for sub in ("export", "query"):
        res = run(sub, "--output", str(tmp_path / "nope"))
        assert res.returncode != 0
        assert "does not exist" in res.stderr, res.stderr


@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_collect_refuses_bad_output_dir_before_the_script_starts(tmp_path, kind):
    marker = tmp_path / "ran"
    out = tmp_path / "out"
    if kind == "symlink":
        (tmp_path / "real").mkdir()
        out.symlink_to(tmp_path / "real")
    else:
        out.write_text("not a dir")
    res = run("collect", "--output", str(out), "--", sys.executable, "-c",
              f"open({str(marker)!r}, 'w')", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert ("symbolic link" if kind == "symlink" else "is a file") in res.stderr
    assert not marker.exists()


def test_collect_command_not_found(tmp_path):
    res = run("collect", "--output", str(tmp_path / "o"), "--", "no-such-command-xyz",
              cwd=tmp_path)
    assert res.returncode == 127 and "no-such-command-xyz" in res.stderr


def test_export_process_ends_with_every_file_and_line(tmp_path):
    """`msprof export` ends without the interpreter's teardown (cli.main.exit_now): the
    process writes the same files, console and exit code as an export run in this process,
    and an error still reaches stderr with its exit code."""
    from msprof_cli.errors import ProfDirError
    from msprof_cli.export.api import run_export
    from tests.reliability_fixtures import golden, msprof

    a, b = golden(tmp_path / "a"), golden(tmp_path / "b")
    res = msprof("export", "--output", str(a))
    assert res.returncode == 0, res.stderr
    assert res.stdout.rstrip().endswith("(plots, opens offline); for CI: msprof summary / "
                                        "msprof check (docs/summary.md).")
    run_export(b, quiet=True)

    def outputs(prof):
        return {str(p.relative_to(prof)): p.read_bytes() for d in ("summary", "timeline")
                for p in sorted(prof.glob(f"device_*/{d}/*"))}

    assert outputs(a) and outputs(a) == outputs(b)
    bad = msprof("export", "--output", str(tmp_path / "missing"))
    assert bad.returncode == ProfDirError.exit_code
    assert bad.stderr.startswith("[ERROR]") and bad.stdout == ""


def test_a_default_export_imports_only_what_it_uses(tmp_path):
    """A tiny export's time is mostly imports: a default export of a small
    PROF dir loads pandas and numpy, not TensorFlow, the report's plotly, Dask, rich or the
    db layout's sqlite3 (each is imported where its feature runs)."""
    import os
    from pathlib import Path

    from tests.reliability_fixtures import golden

    prof = golden(tmp_path / "a")
    code = ("import sys\nfrom msprof_cli.cli.main import main\n"
            f"try:\n    main(['export', '--output', {str(prof)!r}])\n"
            "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "top = {m.split('.')[0] for m in sys.modules}\n"
            "print('HEAVY', sorted(top & {'tensorflow', 'plotly', 'dask', 'distributed', "
            "'rich', 'sqlite3'}), 'pandas' in top)\n"
            # numpy's OpenBLAS started no thread pool (cli.export.exporter), and the variable
            # that says so is not left for what the export starts
            "import os\n"
            "threads = open('/proc/self/status').read().split('Threads:')[1].split()[0]\n"
            "print('BLAS', threads, os.environ.get('OPENBLAS_NUM_THREADS'))")
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=root, env={**env, "PYTHONPATH": str(root)})
    assert "HEAVY [] True" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
    assert "BLAS 1 None" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]


def test_precision_mode_help_lists_every_accepted_mode() -> None:
    from click.testing import CliRunner

    from msprof_cli.cli.main import cli
    from msprof_cli.options import PRECISION_MODES

    text = " ".join(CliRunner().invoke(cli, ["collect", "--help"]).output.split())
    for mode in PRECISION_MODES:
        assert mode in text, mode
