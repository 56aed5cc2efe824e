"""Fuzz the raw decoders with mutated real raw files (hypothesis).

Every example mutates one raw file of a real PROF dir (the golden one, and one written by the
emulated Device with AI CPU, L2 and step trace data): bytes flipped, the file truncated, a range
duplicated or zeroed, garbage appended.  Decoding must then either give a result or raise a
clear MsprofError -- never another exception, never a hang (each example runs under an alarm and
a hypothesis deadline).  The examples are derandomized so that the suite stays reproducible.
"""
from __future__ import annotations

import signal
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msprof_cli.errors import MsprofError
from msprof_cli.export.api import run_export
from msprof_cli.export.decode.dataset import load_prof
from msprof_cli.export.decode.model_info import models_and_iterations
from tests.reliability_fixtures import golden
from tests.test_device_records import config, make_chunk, run

ALARM_S = 10  # a single example taking this long is a hang


@contextmanager
def alarm(seconds: int):
    def hang(signum, frame):
        raise TimeoutError(f"decoding took more than {seconds} s: a hang")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def profs(tmp_path_factory) -> list[tuple[Path, list[Path], dict[Path, bytes]]]:
    """(PROF dir, its raw data files, their pristine bytes) for the golden and a Device dir."""
    out = []
    g = golden(tmp_path_factory.mktemp("golden"))
    d = run(tmp_path_factory.mktemp("device"), [make_chunk(3)], config(l2=True, aicpu=True))
    for prof in (g, d):
        files = sorted(p for p in prof.glob("*/data/*") if p.is_file())
        out.append((prof, files, {p: p.read_bytes() for p in files}))
    return out


mutation = st.one_of(
    st.tuples(st.just("flip"), st.lists(st.tuples(st.floats(0, 1, exclude_max=True),
                                                  st.integers(1, 255)), min_size=1,
                                        max_size=16)),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("duplicate"), st.floats(0, 1), st.floats(0, 1)),
    st.tuples(st.just("zero"), st.floats(0, 1), st.floats(0, 1)),
    st.tuples(st.just("append"), st.binary(min_size=1, max_size=300)),
    st.tuples(st.just("ff"), st.floats(0, 1), st.floats(0, 1)),
)


def mutate(data: bytes, m: tuple) -> bytes:
    b = bytearray(data)
    n = len(b)
    kind = m[0]
    if kind == "flip" and n:
        for pos, xor in m[1]:
            b[int(pos * n)] ^= xor
    elif kind == "truncate":
        del b[int(m[1] * n):]
    elif kind in ("duplicate", "zero", "ff"):
        lo, hi = sorted((int(m[1] * n), int(m[2] * n)))
        if kind == "duplicate":
            b[hi:hi] = b[lo:hi]
        else:
            b[lo:hi] = (b"\0" if kind == "zero" else b"\xff") * (hi - lo)
    elif kind == "append":
        b.extend(m[1])
    return bytes(b)


def decode_or_clear_error(prof: Path, export: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy overflow on garbage values
        try:
            with alarm(ALARM_S):
                if export:
                    run_export(prof, quiet=True)
                else:
                    load_prof(prof)
                    models_and_iterations(prof / "device_0")
        except MsprofError as exc:
            assert str(exc), "an MsprofError must say what went wrong"


def _example(profs, which: int, file_pick: float, muts: list, export: bool) -> None:
    prof, files, pristine = profs[which]
    target = files[int(file_pick * len(files))]
    data = pristine[target]
    for m in muts:
        data = mutate(data, m)
    target.write_bytes(data)
    try:
        decode_or_clear_error(prof, export)
    finally:
        target.write_bytes(pristine[target])


@settings(max_examples=100, deadline=3000, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.integers(0, 1), file_pick=st.floats(0, 1, exclude_max=True),
       muts=st.lists(mutation, min_size=1, max_size=3))
def test_decoders_survive_mutated_raw_files(profs, which, file_pick, muts):
    _example(profs, which, file_pick, muts, export=False)


@settings(max_examples=15, deadline=5000, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(which=st.integers(0, 1), file_pick=st.floats(0, 1, exclude_max=True),
       muts=st.lists(mutation, min_size=1, max_size=2))
def test_export_survives_mutated_raw_files(profs, which, file_pick, muts):
    _example(profs, which, file_pick, muts, export=True)


def test_every_raw_file_kind_is_fuzzed(profs):
    names = {p.name.split(".slice_")[0].rsplit(".", 1)[0] if p.name[0] in "ahlt" else p.name
             for _, files, _ in profs for p in files}
    kinds = {n.split(".")[0] if not n.startswith(("unaging", "aging")) else n.split(".", 1)[1]
             for n in names}
    # (the AI CPU timings: DATA_PREPROCESS.AICPU.{dev})
    for k in ("hwts", "aicore", "ts_track", "DATA_PREPROCESS", "l2_cache", "api_event.data",
              "compact.task_track", "compact.node_basic_info", "additional.tensor_info",
              "additional.hash_dic", "additional.type_info_dic"):
        assert any(k in n for n in kinds), k


def test_pristine_copies_restored(profs):
    for _, files, pristine in profs:
        for p in files:
            assert p.read_bytes() == pristine[p]
