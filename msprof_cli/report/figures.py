"""The report's plots, each a plotly figure built from the summary model (so every number is
the summary's).  Aggregates only: per step (at most MAX_STEPS), per op type, per op (top N),
per stream (ACTIVITY_BINS bins): a 1M-task collection gives the same few hundred KiB of data
as a small one.  One function per plot; each returns (title, figure) or None when the
collection has no such data."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from msprof_cli.summary import diff as D
from msprof_cli.summary import model as M

TOP = 15
FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"
# a colour per meaning, the same in every plot: device work blue/teal, host orange, comm purple
COLORS = {"fp_bp": "#1f77b4", "refresh": "#17becf", "data_aug_bound": "#ff7f0e",
          "other": "#c7c7c7", "communication": "#9467bd", "compute": "#1f77b4",
          "overlapped": "#8c564b", "exposed": "#d62728", "cube": "#1f77b4",
          "vector": "#2ca02c", "scalar": "#ff7f0e", "mte1": "#9467bd", "mte2": "#8c564b",
          "mte3": "#e377c2", "up": "#d62728", "down": "#2ca02c",
          # device memory: torch's memory timeline colours for the same categories
          "weights": "#006400", "optimizer state": "#daa520", "activations": "#d62728",
          "activation": "#d62728", "gradient": "#4169e1", "update": "#daa520",
          "constants": "#2e8b57", "workspace": "#9370db", "free": "#e8e8e8"}
Fig = tuple[str, go.Figure]


def _layout(fig: go.Figure, height: int = 380, **kw: Any) -> go.Figure:
    fig.update_layout(height=height, margin=kw.pop("margin", dict(l=10, r=10, t=30, b=70)),
                      font=dict(family=FONT, size=12), barmode=kw.pop("barmode", None),
                      legend=dict(orientation="h", yanchor="top", y=-0.22, x=0), **kw)
    return fig


def _model_title(dev: M.DeviceSummary, m: M.ModelSummary) -> str:
    name = f' "{m.name}"' if m.name else ""
    return f"device {dev.device_id}, model {m.model_id}{name}"


def step_breakdown(dev: M.DeviceSummary, m: M.ModelSummary) -> Fig | None:
    """Each step from the previous iteration's end to its own, stacked: Data Aug Bound (host,
    measured: input pipeline and Python), FP to BP and Iteration Refresh (device); the
    Iteration Time (step start to end) and the communication not hidden by compute as lines."""
    st = m.steps
    if st is None or not st.iteration_id:
        return None
    x = st.iteration_id

    def z(v: list) -> list[float]:
        return [0.0 if a is None else a for a in v]

    aug, fpbp, ref = z(st.data_aug_bound), z(st.fp_bp), z(st.refresh)
    # without a Data Aug Bound (the first step) the time before FP is the step's start to FP
    before = [max(t - b - c, 0.0) if a is None else 0.0
              for t, a, b, c in zip(st.iteration_time, st.data_aug_bound, fpbp, ref)]
    fig = go.Figure()
    for name, key, ys in (("Data Aug Bound (host, measured)", "data_aug_bound", aug),
                          ("start to FP (first step)", "other", before),
                          ("FP to BP (device)", "fp_bp", fpbp),
                          ("Iteration Refresh (device)", "refresh", ref)):
        if any(ys):
            fig.add_bar(x=x, y=ys, name=name, marker_color=COLORS[key],
                        hovertemplate="iteration %{x}: %{y:.3f} us<extra>" + name + "</extra>")
    fig.add_scatter(x=x, y=st.iteration_time, name="Iteration Time", mode="lines",
                    line=dict(color="#333", width=1, dash="dot"))
    if any(st.comm_not_overlapped):
        fig.add_scatter(x=x, y=st.comm_not_overlapped, name="communication not overlapped",
                        mode="lines+markers", line=dict(color=COLORS["exposed"]))
    every = f" (every {st.stride}th iteration)" if st.stride > 1 else ""
    # a few slow steps (an epoch's end, a checkpoint) would flatten every other bar: the axis
    # stops at 1.5x the 90th percentile and the title says so (zoom out to see them)
    totals = sorted(a + b + c + d for a, b, c, d in zip(aug, before, fpbp, ref))
    p90 = totals[int(0.9 * (len(totals) - 1))]
    clipped = [i for i, t in zip(x, (a + b + c + d for a, b, c, d in
                                     zip(aug, before, fpbp, ref))) if t > 3 * p90 > 0]
    yaxis = dict(title="us since the previous iteration's end")
    if clipped:
        yaxis["range"] = [0, 1.5 * p90]
    _layout(fig, height=420, barmode="stack", xaxis_title="iteration" + every, yaxis=yaxis,
            bargap=0.05 if len(x) > 60 else 0.2, margin=dict(l=10, r=10, t=30, b=110))
    note = (f" (axis clipped: iteration{'s' * (len(clipped) > 1)} "
            f"{', '.join(map(str, clipped[:5]))}{' ...' if len(clipped) > 5 else ''} "
            "much longer, double-click to see all)") if clipped else ""
    return f"Step time, {_model_title(dev, m)}{note}", fig


def top_op_types(dev: M.DeviceSummary, m: M.ModelSummary) -> Fig | None:
    rows = m.op_types[:TOP][::-1]
    if not rows:
        return None
    per = "per step" if m.model_id is not None else "total"
    fig = go.Figure(go.Bar(
        y=[f"{r.op_type} ({r.task_type})" for r in rows], x=[r.per_step_us for r in rows],
        orientation="h", marker_color=COLORS["compute"],
        customdata=[[r.per_step_count, r.share * 100] for r in rows],
        hovertemplate="%{y}: %{x:.3f} us " + per + ", %{customdata[0]} tasks, "
                      "%{customdata[1]:.1f} %<extra></extra>"))
    _layout(fig, height=max(260, 24 * len(rows) + 80), xaxis_title=f"us {per}")
    title = "outside models" if m.model_id is None else _model_title(dev, m)
    return f"Top op types, {title}", fig


def top_ops(dev: M.DeviceSummary, m: M.ModelSummary) -> Fig | None:
    rows = m.ops[:TOP][::-1]
    if not rows:
        return None
    per = "per step" if m.model_id is not None else "total"
    short = [r.name if len(r.name) <= 60 else "..." + r.name[-57:] for r in rows]
    fig = go.Figure(go.Bar(
        y=short, x=[r.per_step_us for r in rows], orientation="h",
        marker_color=COLORS["refresh"],
        customdata=[[r.name, r.op_type, r.input_shapes] for r in rows],
        hovertemplate="%{customdata[0]}<br>%{customdata[1]}, inputs %{customdata[2]}<br>"
                      "%{x:.3f} us " + per + "<extra></extra>"))
    _layout(fig, height=max(260, 24 * len(rows) + 80), xaxis_title=f"us {per}",
            yaxis=dict(automargin=True))
    title = "outside models" if m.model_id is None else _model_title(dev, m)
    return f"Top ops, {title}", fig


PIPES = ("cube", "vector", "scalar", "mte1", "mte2", "mte3")


def pipes(dev: M.DeviceSummary, m: M.ModelSummary) -> Fig | None:
    """AI Core pipe ratios per op type (PMU PipeUtilization), heaviest op types on top: a
    heatmap with the ratio in each cell (the busiest pipe of a row is its bottleneck)."""
    rows = (m.pipes or [])[:TOP]
    cols = [p for p in PIPES if any(getattr(r, p) is not None for r in rows)]
    if not rows or not cols:
        return None
    z = [[getattr(r, p) for p in cols] for r in rows][::-1]
    y = [f"{r.op_type} ({r.per_step_us:.1f} us)" for r in rows][::-1]
    fig = go.Figure(go.Heatmap(
        z=z, x=cols, y=y, zmin=0, zmax=1, colorscale="YlOrRd", texttemplate="%{z:.2f}",
        colorbar=dict(title="ratio"),
        hovertemplate="%{y}: %{x} busy %{z:.2f} of the cycles<extra></extra>"))
    _layout(fig, height=max(240, 24 * len(rows) + 90))
    return f"AI Core pipe ratios per op type (time per step), {_model_title(dev, m)}", fig


def activity(devices: list[M.DeviceSummary]) -> Fig | None:
    """A minimap: per device and stream, the busy share of each time bin."""
    devs = [d for d in devices if d.activity is not None]
    if not devs:
        return None
    t0 = min(d.activity.start_us for d in devs)
    z, y = [], []
    width = max(d.activity.end_us for d in devs) - t0
    bins = devs[0].activity.bins
    for d in devs:
        a = d.activity
        for sid, row in zip(a.streams, a.busy):
            z.append(row)
            y.append(f"dev {d.device_id} stream {sid}")
    # every device's bins are placed on one time axis (ms since the first task)
    x = [round((i + 0.5) * width / bins / 1000, 3) for i in range(bins)]
    fig = go.Figure(go.Heatmap(z=z, x=x, y=y, zmin=0, zmax=1, colorscale="Blues",
                               colorbar=dict(title="busy"),
                               hovertemplate="%{y}, %{x:.3f} ms: busy %{z:.0%}<extra></extra>"))
    _layout(fig, height=max(220, 28 * len(y) + 110), xaxis_title="ms since the first task")
    return "Device activity per stream (minimap)", fig


def overlap(devices: list[M.DeviceSummary]) -> Fig | None:
    """Communication vs compute per device: compute, communication hidden behind it, and
    communication not hidden (it lengthens the step)."""
    devs = [d for d in devices if d.overlap is not None and d.overlap.communication_us > 0]
    if not devs:
        return None
    names = [f"{d.prof[-8:]} dev {d.device_id}" for d in devs]
    o = [d.overlap for d in devs]
    fig = go.Figure()
    fig.add_bar(x=names, y=[v.compute_us - v.overlapped_us for v in o], name="compute only",
                marker_color=COLORS["compute"])
    fig.add_bar(x=names, y=[v.overlapped_us for v in o], name="compute with communication",
                marker_color=COLORS["overlapped"])
    fig.add_bar(x=names, y=[v.communication_us - v.overlapped_us for v in o],
                name="communication not overlapped", marker_color=COLORS["exposed"])
    _layout(fig, barmode="stack", yaxis_title="us (whole collection)")
    return "Communication vs compute per device", fig


def diff_types(md: D.ModelDiff) -> Fig | None:
    rows = md.types[:TOP][::-1]
    if not rows:
        return None
    fig = go.Figure(go.Bar(
        y=[f"{t.op_type} ({t.task_type})" for t in rows], x=[t.delta_us for t in rows],
        orientation="h", marker_color=[COLORS["up"] if t.delta_us > 0 else COLORS["down"]
                                       for t in rows],
        customdata=[[t.base_us, t.new_us, (t.share or 0) * 100] for t in rows],
        hovertemplate="%{y}: %{customdata[0]:.3f} -> %{customdata[1]:.3f} us "
                      "(%{x:+.3f} us, %{customdata[2]:.0f} % of the step change)"
                      "<extra></extra>"))
    _layout(fig, height=max(240, 24 * len(rows) + 80), xaxis_title="change, us per step")
    who = "outside models" if md.new_model is None else f"model {md.new_model}"
    return f"Op type changes against the baseline, device {md.device_id} {who}", fig


def memory_breakdown(devices: list[M.DeviceSummary]) -> Fig | None:
    """Per device, the predicted peak split by category; the usable HBM as a line when the
    peak is near enough to it to show (emulated: docs/summary.md 7)."""
    devs = [d for d in devices if d.memory is not None]
    if not devs:
        return None
    names = [f"{d.prof[-8:]} dev {d.device_id}" for d in devs]
    peak = max(d.memory.peak for d in devs)
    usable = min(d.memory.usable for d in devs)
    unit, div = ("GiB", float(1 << 30)) if peak >= 1 << 30 else ("MiB", float(1 << 20))
    fig = go.Figure()
    for cat in devs[0].memory.parts:
        fig.add_bar(x=names, y=[d.memory.parts.get(cat, 0) / div for d in devs], name=cat,
                    marker_color=COLORS.get(cat, COLORS["other"]))
    if peak >= usable / 20:
        fig.add_hline(y=usable / div, line_dash="dash", line_color="#333333",
                      annotation_text="usable HBM")
    _layout(fig, barmode="stack", yaxis_title=unit)
    return (f"Device memory at the peak (emulated; {usable / (1 << 30):.2f} GiB usable)", fig)


def memory_over_step(dev: M.DeviceSummary, mm: M.ModelMemoryRow) -> Fig | None:
    """The bytes live over one step of a model's graph, by what produced them, against the
    node index (GE's order of the graph's tasks), with the planned block as a line."""
    c = mm.curve
    if not c or not c.get("node"):
        return None
    mib = float(1 << 20)
    fig = go.Figure()
    for kind, label in (("activation", "activations (forward)"), ("gradient", "gradients"),
                        ("update", "optimizer temporaries"),
                        ("workspace", "kernels' workspaces")):
        if any(c.get(kind, ())):
            fig.add_scatter(x=c["node"], y=[v / mib for v in c[kind]], name=label,
                            stackgroup="live", mode="lines", line=dict(width=0.5),
                            fillcolor=COLORS[kind], line_color=COLORS[kind])
    fig.add_scatter(x=[c["node"][0], c["node"][-1]], y=[mm.feature_map / mib] * 2,
                    name="planned feature map", mode="lines",
                    line=dict(color="#333333", dash="dash"))
    _layout(fig, xaxis_title="node index in the step (GE's task order)", yaxis_title="MiB")
    name = f' "{mm.name}"' if mm.name else ""
    return f"Device memory over the step, device {dev.device_id}, model {mm.model_id}{name}", fig
