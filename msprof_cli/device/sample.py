"""sample.json of a result dir (docs/formats/raw-format.md 3.6, docs/formats/options.md 5).

The real collector writes a template of ~100 switch keys; we keep exactly the keys of the golden
sample.json (the golden Ascend 910 collection) and set the ones that describe a switch truthfully
from the ProfilingConfig.  Standard library only.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from msprof_cli.device.chip import ASCEND910, ChipSpec
from msprof_cli.options import AIC_METRIC_EVENTS, L2_CACHE_EVENTS, ProfilingConfig
from msprof_cli.raw.control import HOST_DEVICE_ID, write_json_line

_TEMPLATE: dict[str, Any] = {
    "acc_pmu_mode": "",
    "acl": "on",
    "aiCtrlCpuProfiling": "off",
    "ai_core_metrics": "PipeUtilization",
    "ai_core_profiling": "on",
    "ai_core_profiling_events": "0x8,0xa,0x9,0xb,0xc,0xd,0x54,0x55",
    "ai_core_profiling_metrics": "",
    "ai_core_profiling_mode": "task-based",
    "ai_core_status": "",
    "ai_ctrl_cpu_profiling_events": "",
    "ai_vector_status": "",
    "aicore_sampling_interval": 10,
    "aicpuTrace": "off",
    "aiv_metrics": "PipeUtilization",
    "aiv_profiling": "off",
    "aiv_profiling_events": "0x8,0xa,0x9,0xb,0xc,0xd,0x54,0x55",
    "aiv_profiling_metrics": "",
    "aiv_profiling_mode": "task-based",
    "aiv_sampling_interval": 10,
    "app": "python3",
    "app_dir": "MS_SYS_PATH",
    "app_env": "",
    "app_location": "",
    "app_parameters": "train.py",
    "biu": "",
    "biu_freq": 1000,
    "cpu_profiling": "off",
    "cpu_sampling_interval": 20,
    "ddr_interval": 20,
    "ddr_master_id": 0,
    "ddr_profiling": "",
    "ddr_profiling_events": "",
    "devices": "64",
    "dvpp_profiling": "off",
    "dvpp_sampling_interval": 20,
    "ffts_block": "",
    "ffts_thread_task": "",
    "hardware_mem": "off",
    "hardware_mem_sampling_interval": 20,
    "hbmInterval": 20,
    "hbmProfiling": "",
    "hbm_profiling_events": "",
    "hcclTrace": "",
    "hccsInterval": 20,
    "hccsProfiling": "off",
    "host_one_pid_cpu_profiling": "off",
    "host_disk_freq": 50,
    "host_disk_profiling": "off",
    "host_one_pid_mem_profiling": "off",
    "host_network_profiling": "off",
    "host_osrt_profiling": "off",
    "host_profiling": 0,
    "host_sys": "",
    "host_sys_pid": 4242,
    "hwts_log": "on",
    "hwts_log1": "on",
    "interconnection_profiling": "off",
    "interconnection_sampling_interval": 20,
    "io_profiling": "off",
    "io_sampling_interval": 10,
    "is_cancel": 0,
    "jobInfo": "",
    "job_id": "64",
    "l2CacheTaskProfiling": "off",
    "l2CacheTaskProfilingEvents": "",
    "llc_interval": 20,
    "llc_profiling": "read",
    "llc_profiling_events": "read",
    "low_power": "",
    "modelExecution": "on",
    "modelLoad": "",
    "msprof": "off",
    "msprofBinPid": 4242,
    "msprof_llc_profiling": "",
    "msproftx": "off",
    "nicInterval": 10,
    "nicProfiling": "off",
    "pcieInterval": 20,
    "pcieProfiling": "",
    "pid_profiling": "off",
    "pid_sampling_interval": 100,
    "profiling_mode": "",
    "profiling_options": "",
    "profiling_period": -1,
    "result_dir": "/tmp/goldgen/PROF_000001_20231114221320000_ABCDEFGHIJKLMNOP/host/",
    "roceInterval": 10,
    "roceProfiling": "off",
    "runtimeApi": "off",
    "runtimeTrace": "on",
    "stars_acsq_task": "",
    "stars_sub_task": "",
    "storageLimit": "",
    "stream_enabled": "on",
    "sys_profiling": "off",
    "sys_sampling_interval": 100,
    "tsCpuProfiling": "off",
    "ts_cpu_hot_function": "",
    "ts_cpu_profiling_events": "",
    "ts_cpu_usage": "",
    "ts_fw_training": "",
    "ts_keypoint": "on",
    "ts_memcpy": "on",
    "ts_task_track": "",
    "ts_timeline": "",
}

def _on(flag: bool) -> str:
    return "on" if flag else "off"


def _hex_list(events: Sequence[int]) -> str:
    return ",".join(f"0x{e:x}" for e in events)


def sample_json(config: ProfilingConfig, *, result_dir: Path, device_id: int | None,
                app: Sequence[str], pid: int, chip: ChipSpec = ASCEND910) -> dict[str, Any]:
    """sample.json for the host dir (device_id None) or device_{device_id}."""
    out = dict(_TEMPLATE)
    pmu = config.pmu_on
    task_on = config.task_time != "off"
    out.update({
        "ai_core_profiling": _on(pmu),
        "ai_core_metrics": config.aic_metrics if pmu else "",
        "ai_core_profiling_events": _hex_list(config.aic_events) if pmu else "",
        "ai_core_profiling_mode": "task-based",
        # 910 has no AI Vector core: aiv stays off; keep the template's metric names
        "aiv_metrics": config.aic_metrics or "PipeUtilization",
        "aiv_profiling_events": _hex_list(AIC_METRIC_EVENTS["PipeUtilization"]),
        "aicpuTrace": _on(config.aicpu),
        "runtimeApi": _on(config.runtime_api),
        "msproftx": _on(config.msproftx),
        "hcclTrace": _on(config.hccl),
        "l2CacheTaskProfiling": _on(config.l2),
        "l2CacheTaskProfilingEvents": _hex_list(L2_CACHE_EVENTS) if config.l2 else "",
        "hwts_log": _on(task_on),
        "hwts_log1": _on(task_on),
        "ts_keypoint": _on(config.training_trace),
        "modelExecution": _on(task_on or config.training_trace),
        "runtimeTrace": _on(task_on),
        "acl": _on(config.ascendcl),
        "profiling_options": config.raw_options,
        "profiling_mode": "true" if config.source == "env" else "",
        "storageLimit": f"{config.storage_limit_mb}MB" if config.storage_limit_mb else "",
        "result_dir": str(result_dir).rstrip("/") + "/",
        "devices": str(HOST_DEVICE_ID if device_id is None else device_id),
        "job_id": str(HOST_DEVICE_ID if device_id is None else device_id),
        "app": Path(app[0]).name if app else "",
        "app_location": str(Path(app[0]).parent) if app and "/" in app[0] else "",
        "app_parameters": " ".join(app[1:]),
        "msprofBinPid": pid,
        "host_sys_pid": pid,
        # the device memory samples (docs/formats/device-memory.md 1; the collector's
        # ProfileParams: the period in ms).  --task-memory has no key in this file's
        # generation (the analysis reads none of them)
        "hardware_mem": _on(config.hardware_mem_freq > 0),
        "hardware_mem_sampling_interval": 1000 // config.hardware_mem_freq
        if config.hardware_mem_freq else 20,
    })
    if chip.raw_layout == "stars":
        out.update(_stars_keys(config, chip, pmu, task_on))
    return out


def _stars_keys(config: ProfilingConfig, chip: ChipSpec, pmu: bool, task_on: bool
                ) -> dict[str, Any]:
    """What an Atlas A2 collection says differently (docs/formats/ascend910b.md 1.4, 6.2):
    the AI Cube cores' metric group and events (PipeUtilizationExct under PipeUtilization),
    the AI Vector cores' own group and events with aiv_profiling on, and the STARS task-log
    switches in place of the 910's hwts log (the analysis reads none of these four; they
    say what the collector ran)."""
    aic_events, aiv_events = chip.pmu_events(config.aic_metrics, config.aic_events)
    return {
        "ai_core_metrics": chip.metric_name(config.aic_metrics) if pmu else "",
        "ai_core_profiling_events": _hex_list(aic_events) if pmu else "",
        "aiv_profiling": _on(pmu),
        "aiv_metrics": config.aic_metrics if pmu else "",
        "aiv_profiling_events": _hex_list(aiv_events) if pmu else "",
        "aiv_profiling_mode": "task-based",
        "hwts_log": "off",
        "hwts_log1": "off",
        "stars_acsq_task": _on(task_on),
        "ffts_thread_task": _on(task_on),
    }


def write_sample_json(result_dir: Path, config: ProfilingConfig, *, device_id: int | None,
                      app: Sequence[str], pid: int, chip: ChipSpec = ASCEND910) -> None:
    write_json_line(result_dir / "sample.json",
                    sample_json(config, result_dir=result_dir, device_id=device_id, app=app,
                                pid=pid, chip=chip))

