"""The msproftx-style annotation API (msprof_cli.mstx) without TensorFlow."""
import pytest

from msprof_cli import mstx


def test_disabled_calls_are_no_ops():
    assert not mstx.enabled()
    mstx.mark("x")
    with mstx.range("block"):
        pass
    mstx.range_end(mstx.range_start("r"))


def test_misuse_gives_clear_errors():
    with pytest.raises(RuntimeError, match="without a matching range_push"):
        mstx.range_pop()
    with pytest.raises(ValueError, match="no open range with that id"):
        mstx.range_end(123456789)


def test_records_go_to_the_active_collection(monkeypatch):
    import types

    from msprof_cli.collect import agent as agent_mod

    got = []
    coll = types.SimpleNamespace(config=types.SimpleNamespace(msproftx=True),
                                 add_marker=got.append)
    monkeypatch.setattr(agent_mod.AGENT, "collection", coll)
    mstx.mark("m", domain="d")
    with mstx.range("outer"):
        mstx.range_push("inner")
        mstx.range_pop()
    assert [(g.message, g.event_type, g.domain) for g in got] == [
        ("m", mstx.MARK, "d"), ("inner", mstx.PUSH_POP, "default"),
        ("outer", mstx.PUSH_POP, "default")]
    assert got[1].start_ns <= got[1].end_ns and got[2].start_ns <= got[1].start_ns
    coll.config.msproftx = False
    mstx.mark("ignored")
    assert len(got) == 3
