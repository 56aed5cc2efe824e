"""README.txt of the mindstudio layout (docs/formats/export-files.md 2.4): our own wording, real
structure.

Structure: ``Timeline file description:``, numbered ``{i}.{name}.json:{text}`` blocks with
TAB-indented field notes, a blank line, ``Summary file description:`` and the same for CSVs.
Only files that were written are listed, in the order the real tool lists them.
"""
from __future__ import annotations

TIMELINE_ORDER = ["step_trace", "msprof", "msprof_tx"]
SUMMARY_ORDER = ["task_time", "api_statistic", "op_summary", "op_statistic", "step_trace",
                 "fusion_op", "aicpu", "l2_cache", "communication_statistic", "msprof_tx"]

TEXT: dict[tuple[str, str], tuple[str, list[str]]] = {
    ("step_trace", "json"): ("Iteration trace of every model, one lane per model.", [
        "Iteration ID: iteration number within its model.",
        "FP_BP Time: BP End minus FP Start.",
        "Iteration Refresh: Iteration End minus BP End.",
        "Data_aug Bound: FP Start minus the end of the previous iteration (N/A for the first).",
    ]),
    ("msprof", "json"): ("Merged timeline of host and device activity.", [
        "CANN: host API calls (Model, Node, Runtime, AscendCL) per thread.",
        "Ascend Hardware: device tasks per stream, plus the Step Trace lanes.",
        "HostToDevice: flow arrows from a task launch to the task on the device.",
        "Overlap Analysis: Computing, Communication and Free time of the device.",
    ]),
    ("msprof_tx", "json"): ("User markers recorded with msproftx.", []),
    ("task_time", "csv"): ("Every device task with its start, stop and duration.", [
        "kernel_name: operator of the task (N/A without host data).",
        "kernel_type: task type of the operator or of the runtime task.",
        "task_time: task duration in us.",
    ]),
    ("api_statistic", "csv"): ("Statistics of the host API calls per level.", [
        "Level: acl, model, node, runtime or communication.",
        "Variance: variance of the call durations.",
    ]),
    ("op_summary", "csv"): ("One row per operator task with timing, shapes and PMU metrics.", [
        "Task Start Time: task start time (us, local clock).",
        "Task Duration: task run time in us.",
        "Task Wait Time: gap to the previous task (start - previous start - previous "
        "duration).",
        "Block Dim: number of cores the task ran on.",
        "aicore_time: average time on an AI Core, from total_cycles and Block Dim.",
        "total_cycles: cycles of all blocks of the task.",
    ]),
    ("op_statistic", "csv"): ("Operator call counts and time per operator type and core type.",
                              ["Ratio: share of the total task time in percent."]),
    ("step_trace", "csv"): ("Iteration trace: per iteration FP, BP and end times.", [
        "Iteration Time: iteration end minus iteration start.",
        "FP to BP Time: BP End minus FP Start.",
        "Iteration Refresh: Iteration End minus BP End.",
        "Data Aug Bound: FP Start minus the previous Iteration End.",
        "Model ID: model the iteration belongs to.",
    ]),
    ("fusion_op", "csv"): ("Fused operators and their memory use.", []),
    ("aicpu", "csv"): ("AI CPU task timing.", []),
    ("l2_cache", "csv"): ("L2 cache hit and victim rates per task.", []),
    ("msprof_tx", "csv"): ("User markers recorded with msproftx.", [
        "Start_time, End_time: host time of the marker (us, local clock).",
        "Device Start_time, Device End_time: device time of the marker (N/A on Ascend910).",
    ]),
    ("communication_statistic", "csv"): ("Communication (HCCL) operator statistics per type.", [
        "Ratio: share of the total communication time in percent."]),
}


def summary_json_stem(name: str) -> str:
    """The file stem of summary `name` with ``--summary-format json`` (mindstudio layout):
    ``{name}_summary`` where a timeline has the name (step_trace, msprof_tx: their
    ``{name}_{ts}.json`` files would replace each other), `name` otherwise.  Project
    choice (the reference names no such file)."""
    return f"{name}_summary" if name in TIMELINE_ORDER else name


def _blocks(names: list[str], ext: str, shown_ext: str | None = None) -> list[str]:
    lines: list[str] = []
    for i, name in enumerate(names, 1):
        desc, notes = TEXT.get((name, ext), (
            f"Here is no description about this file: {name}, please check in "
            f"'Profiling Instructions'!", []))
        shown = summary_json_stem(name) if shown_ext == "json" else name
        lines.append(f"{i}.{shown}.{shown_ext or ext}:{desc}")
        lines.extend(f"\t{n}" for n in notes)
    return lines


def readme_text(timelines: set[str], summaries: set[str], summary_format: str = "csv") -> str:
    t = [n for n in TIMELINE_ORDER if n in timelines] + sorted(timelines - set(TIMELINE_ORDER))
    s = [n for n in SUMMARY_ORDER if n in summaries] + sorted(summaries - set(SUMMARY_ORDER))
    lines = ["Timeline file description:"] + _blocks(t, "json") + ["", "Summary file description:"]
    lines += _blocks(s, "csv", summary_format)  # json summaries keep the csv descriptions
    return "\n".join(lines) + "\n"
