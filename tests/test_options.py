"""PROFILING_OPTIONS validation (docs/formats/options.md): each bad-input class has its own
error."""
import json

import pytest

from msprof_cli.cli.collect import flags_to_options
from msprof_cli.errors import OptionsError
from msprof_cli.options import (AIC_METRIC_EVENTS, ProfilingConfig, config_from_env,
                                parse_options_json, validate_options)


def test_mode_unset_or_false_means_off():
    assert config_from_env({}) is None
    assert config_from_env({"PROFILING_MODE": "false"}) is None


def test_mode_true_without_options_uses_the_documented_default_set(tmp_path):
    cfg = config_from_env({"PROFILING_MODE": "true"}, cwd=str(tmp_path))
    assert cfg.output == str(tmp_path)
    assert cfg.training_trace and cfg.task_time == "l1" and cfg.hccl and cfg.aicpu
    assert cfg.aic_metrics == "PipeUtilization"
    assert not cfg.l2 and not cfg.runtime_api and not cfg.msproftx


def test_options_given_take_per_key_defaults(tmp_path):
    cfg = config_from_env({"PROFILING_MODE": "true",
                           "PROFILING_OPTIONS": '{"output": "out"}'}, cwd=str(tmp_path))
    assert cfg.output == str(tmp_path / "out")
    assert cfg.task_time == "l1" and not cfg.training_trace
    assert not cfg.hccl and not cfg.aicpu
    assert cfg.aic_metrics == "PipeUtilization"


def test_seed_example_is_accepted():
    text = ('{"output":"/tmp/profiling","training_trace":"on","task_trace":"on",'
            '"fp_point":"","bp_point":"","aic_metrics":"PipeUtilization"}')
    cfg = config_from_env({"PROFILING_MODE": "true", "PROFILING_OPTIONS": text})
    assert cfg.output == "/tmp/profiling" and cfg.training_trace and cfg.task_time == "l1"
    assert cfg.raw_options == text


def test_unknown_key_is_a_hard_error_naming_the_key():
    with pytest.raises(OptionsError, match=r"Error: parsing invalid key:trainingtrace\."):
        validate_options({"trainingtrace": "on"})


def test_malformed_json_gives_the_position():
    with pytest.raises(OptionsError, match=r"line 1 column \d+"):
        parse_options_json('{"output": "/tmp",}')


def test_not_an_object():
    with pytest.raises(OptionsError, match="must be a JSON object"):
        parse_options_json('["output"]')


def test_old_colon_list_form_is_refused():
    with pytest.raises(OptionsError, match="colon-list"):
        parse_options_json("training_trace:task_trace")


@pytest.mark.parametrize("key", ["training_trace", "hccl", "aicpu", "l2", "msproftx",
                                 "runtime_api"])
def test_switch_with_bad_value_names_key_value_and_accepted(key):
    with pytest.raises(OptionsError) as exc:
        validate_options({key: "yes"})
    msg = str(exc.value)
    assert key in msg and '"yes"' in msg and '"on", "off"' in msg


def test_task_trace_levels():
    assert validate_options({"task_trace": "l0"}).task_time == "l0"
    assert validate_options({"task_time": "on"}).task_time == "l1"
    assert validate_options({"task_trace": "off"}).task_time == "off"
    with pytest.raises(OptionsError, match="task_trace"):
        validate_options({"task_trace": "l2"})
    with pytest.raises(OptionsError, match="same switch"):
        validate_options({"task_trace": "l0", "task_time": "l1"})


def test_l0_has_no_pmu():
    cfg = validate_options({"task_time": "l0"})
    assert not cfg.pmu_on and not cfg.op_info


@pytest.mark.parametrize("group", sorted(AIC_METRIC_EVENTS))
def test_every_aic_metrics_group(group):
    cfg = validate_options({"aic_metrics": group})
    assert cfg.aic_metrics == group and cfg.aic_events == AIC_METRIC_EVENTS[group]


def test_aic_metrics_empty_means_default_and_custom_events():
    assert validate_options({"aic_metrics": ""}).aic_metrics == "PipeUtilization"
    assert validate_options({"aic_metrics": "Custom:0x8,0x9"}).aic_events == (8, 9)
    with pytest.raises(OptionsError, match="1 to 8"):
        validate_options({"aic_metrics": "Custom:" + ",".join(["0x1"] * 9)})
    with pytest.raises(OptionsError, match="not a hex number"):
        validate_options({"aic_metrics": "Custom:12"})


def test_aic_metrics_of_other_chips_refused():
    with pytest.raises(OptionsError, match="not supported on Ascend910"):
        validate_options({"aic_metrics": "L2Cache"})
    with pytest.raises(OptionsError, match="Accepted values"):
        validate_options({"aic_metrics": "Pipe"})


@pytest.mark.parametrize("bad", ["\n", "\f", "\r", "\b", "\t", "\v", "\x7f"])
def test_output_forbidden_characters(bad):
    with pytest.raises(OptionsError, match="forbidden character"):
        validate_options({"output": f"/tmp/a{bad}b"})


def test_output_empty_is_an_error():
    with pytest.raises(OptionsError, match="Result path is empty"):
        validate_options({"output": ""})


def test_output_must_be_string():
    with pytest.raises(OptionsError, match="must be a JSON string"):
        validate_options({"output": 5})


@pytest.mark.parametrize("value,ok", [("200MB", True), ("4294967295MB", True), ("199MB", False),
                                      ("4294967296MB", False), ("1024", False), ("1GB", False)])
def test_storage_limit(value, ok):
    if ok:
        assert validate_options({"storage_limit": value}).storage_limit_mb == int(value[:-2])
    else:
        with pytest.raises(OptionsError, match="storage_limit"):
            validate_options({"storage_limit": value})


def test_freq_keys_need_json_integers_in_range():
    assert "dvpp_freq" in validate_options({"dvpp_freq": 50}).not_emulated
    with pytest.raises(OptionsError, match="JSON integer"):
        validate_options({"dvpp_freq": "50"})
    with pytest.raises(OptionsError, match="JSON integer"):
        validate_options({"dvpp_freq": True})
    with pytest.raises(OptionsError, match="out of range"):
        validate_options({"sys_interconnection_freq": 51})


def test_instr_profiling_conflicts():
    with pytest.raises(OptionsError, match="instrProfilingFreq is set"):
        validate_options({"instr_profiling_freq": 1000, "task_time": "on"})
    with pytest.raises(OptionsError, match="Ascend910B"):
        validate_options({"instr_profiling_freq": 1000})


def test_host_sys_values():
    validate_options({"host_sys": "cpu,mem"})
    with pytest.raises(OptionsError, match="The value: disk of host_sys is not support"):
        validate_options({"host_sys": "cpu,disk"})


def test_config_json_round_trip():
    cfg = validate_options({"aic_metrics": "Memory", "aicpu": "on"})
    assert ProfilingConfig.from_json(cfg.to_json()) == cfg


def test_cli_flags_map_onto_options():
    opts = flags_to_options(task_time=None, training_trace=None, ai_core="on", aic_metrics=None,
                            aicpu="on", output="/tmp/x")
    assert opts == {"task_time": "on", "training_trace": "on", "aic_metrics": "PipeUtilization",
                    "aicpu": "on", "output": "/tmp/x"}
    off = flags_to_options(task_time="off", training_trace=None, ai_core="off")
    assert off == {"task_time": "off", "training_trace": "off"}
    cfg = validate_options(flags_to_options(task_time="l0", ai_core="on"), source="cli")
    assert cfg.task_time == "l0" and cfg.training_trace


def test_validation_error_is_json_serialisable_message():
    with pytest.raises(OptionsError) as exc:
        validate_options({"l2": 1})
    json.dumps(str(exc.value))


def test_dropout_mode_from_the_environment_for_every_route(monkeypatch) -> None:
    from msprof_cli.options import (config_from_env, default_config, dropout_from_env,
                                    normalize_dropout, validate_options)

    assert normalize_dropout(None) == "tf" and normalize_dropout(" NPU ") == "npu"
    with pytest.raises(OptionsError, match='MSPROF_CLI_DROPOUT "cuda" is not a dropout mode'):
        dropout_from_env({"MSPROF_CLI_DROPOUT": "cuda"})
    monkeypatch.setenv("MSPROF_CLI_DROPOUT", "npu")
    assert default_config("/tmp").dropout == "npu"
    assert validate_options({"output": "/tmp"}, source="profiler").dropout == "npu"
    cfg = config_from_env({"PROFILING_MODE": "true"}, cwd="/tmp")
    assert cfg is not None and cfg.dropout == "npu"
    assert type(cfg).from_json(cfg.to_json()).dropout == "npu"  # reaches the child


def test_soc_version_names_the_chip_for_every_route(monkeypatch) -> None:
    from msprof_cli.options import (config_from_env, default_config, normalize_soc_version,
                                    soc_version_from_env, validate_options)

    assert normalize_soc_version(None) == "Ascend910A"
    assert normalize_soc_version(" ascend910 ") == "Ascend910A"  # the 910's older name
    with pytest.raises(OptionsError, match='MSPROF_CLI_SOC_VERSION "A100" is not a CANN '
                       'soc_version; use one of Ascend910A, Ascend910B1, Ascend910B2, '
                       'Ascend910B3, Ascend910B4'):
        soc_version_from_env({"MSPROF_CLI_SOC_VERSION": "A100"})
    assert normalize_soc_version("ascend910b3") == "Ascend910B3"  # every chip is emulated
    # an Atlas A2 collects no L2 task events: l2 is turned off, with a warning
    monkeypatch.setenv("MSPROF_CLI_SOC_VERSION", "Ascend910B4")
    a2 = validate_options({"output": "/tmp", "l2": "on"}, source="profiler")
    assert (a2.soc_version, a2.l2, a2.not_emulated) == ("Ascend910B4", False, ("l2",))
    assert any("L2 cache task events of Ascend910B4" in w for w in a2.warnings)
    monkeypatch.setenv("MSPROF_CLI_SOC_VERSION", "ascend910a")
    assert validate_options({"output": "/tmp", "l2": "on"}, source="profiler").l2
    assert default_config("/tmp").soc_version == "Ascend910A"
    assert validate_options({"output": "/tmp"}, source="profiler").soc_version == "Ascend910A"
    cfg = config_from_env({"PROFILING_MODE": "true"}, cwd="/tmp")
    assert cfg is not None and type(cfg).from_json(cfg.to_json()).soc_version == "Ascend910A"


def test_the_chip_table_holds_each_sku_from_its_soc_file() -> None:
    from msprof_cli.device.chip import CHIPS, get_chip

    # hicann/runtime platform_config Ascend910B*.ini (docs/device-model.md 1)
    want = {"Ascend910B1": (24, 48, 1850, 64, 192), "Ascend910B2": (24, 48, 1800, 64, 192),
            "Ascend910B3": (20, 40, 1800, 64, 192), "Ascend910B4": (20, 40, 1500, 32, 96)}
    for name, (aic, aiv, mhz, hbm, l2) in want.items():
        c = CHIPS[name]
        assert (c.ai_core_num, c.aiv_num, c.aic_mhz, c.hbm_capacity_bytes >> 30,
                c.l2_bytes >> 20) == (aic, aiv, mhz, hbm, l2)
        assert c.platform_version == "5" and c.hwts_mhz == 50 and c.tick_ns == 20.0
    a = get_chip("Ascend910A")
    assert (a.ai_core_num, a.aiv_num, a.platform_version, a.hwts_mhz) == (32, 0, "1", 100)


def test_the_atlas_a2_groups_are_accepted_on_the_a2_only() -> None:
    from msprof_cli.options import validate_options

    for group, first in (("L2Cache", 0x500), ("MemoryAccess", 0x32)):
        with pytest.raises(OptionsError, match=f'"{group}" of "aic_metrics" is not supported '
                           "on Ascend910A"):
            validate_options({"aic_metrics": group}, soc="Ascend910A")
        cfg = validate_options({"aic_metrics": group, "task_time": "on"}, soc="Ascend910B2")
        assert (cfg.aic_metrics, cfg.aic_events[0], cfg.soc_version) == (group, first,
                                                                         "Ascend910B2")
