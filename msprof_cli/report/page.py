"""`msprof report`: one self-contained HTML file (plotly.js embedded, no CDN, no server) built
from the summary model, with the diff view when a baseline is given.

The page marks itself for tests and CI: `<body data-plots=N data-drawn=K data-nonempty=E
data-errors=X>` once plotly has drawn every figure (N figures, K drawn, E with visible marks,
X script errors)."""
from __future__ import annotations

import html
import json
from pathlib import Path

import plotly.io as pio
from plotly.offline import get_plotlyjs
from plotly.utils import PlotlyJSONEncoder

from msprof_cli import __version__
from msprof_cli.summary import diff as D
from msprof_cli.summary import model as M
from msprof_cli.summary.render import explain, shorten
from msprof_cli.summary.units import pct, share, signed_us, us

from . import figures as F

TEMPLATE = "plotly_white"
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;
background:#f6f7f9}
header{background:#14325c;color:#fff;padding:18px 28px}
header h1{margin:0 0 6px;font-size:22px} header p{margin:2px 0;opacity:.9;font-size:13px}
main{padding:8px 28px 40px;max-width:1400px}
section{background:#fff;border:1px solid #e3e6ea;border-radius:8px;margin:16px 0;
padding:12px 18px}
h2{font-size:18px;margin:6px 0 10px} h3{font-size:15px;margin:14px 0 6px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:8px 0}
.card{border:1px solid #e3e6ea;border-radius:6px;padding:8px 12px;min-width:150px}
.card b{display:block;font-size:18px} .card span{font-size:12px;color:#666}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:12px}
table{border-collapse:collapse;font-size:12px;width:100%}
th,td{padding:4px 8px;border-bottom:1px solid #eee;text-align:left}
th{cursor:pointer;background:#f0f2f5;position:sticky;top:0} td.n{text-align:right;
font-variant-numeric:tabular-nums}
.scroll{max-height:420px;overflow:auto} code{background:#f0f2f5;padding:0 3px}
.note{color:#666;font-size:12px} .up{color:#c62828} .down{color:#2e7d32}
ul.advice li{margin:4px 0}
"""
# click a header to sort its table (numbers by their data-v value)
SORT_JS = """
document.querySelectorAll('table.sort th').forEach((th, i) => th.addEventListener('click',
 () => { const t = th.closest('table'), b = t.tBodies[0], asc = th.dataset.asc !== '1';
  t.querySelectorAll('th').forEach(h => delete h.dataset.asc); th.dataset.asc = asc ? '1' : '';
  const key = r => { const c = r.cells[i]; return c.dataset.v !== undefined ?
   parseFloat(c.dataset.v) : c.textContent; };
  [...b.rows].sort((x, y) => { const a = key(x), c = key(y);
   return (a > c ? 1 : a < c ? -1 : 0) * (asc ? 1 : -1); }).forEach(r => b.appendChild(r));
 }));
"""
DRAW_JS = """
const body = document.body; body.dataset.errors = body.dataset.errors || '0';
window.addEventListener('error', () => { body.dataset.errors = +body.dataset.errors + 1; });
body.dataset.plots = FIGS.length; let drawn = 0, nonempty = 0;
Promise.all(FIGS.map(f => {
  const layout = Object.assign({template: TEMPLATE}, f.fig.layout || {});
  return Plotly.newPlot(f.id, f.fig.data, layout, {responsive: true, displaylogo: false})
   .then(div => { drawn++;
     if (div.querySelectorAll('g.trace, g.hm image, .heatmaplayer image').length) nonempty++;
   });
})).then(() => { body.dataset.drawn = drawn; body.dataset.nonempty = nonempty; },
         err => { body.dataset.errors = +body.dataset.errors + 1; console.error(err); });
"""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


class Page:
    """The figures and the HTML of the sections, in page order."""

    def __init__(self) -> None:
        self.figs: list[dict] = []
        self.parts: list[str] = []

    def figure(self, fig: F.Fig | None) -> str:
        if fig is None:
            return ""
        title, f = fig
        data = json.loads(pio.to_json(f, validate=True))
        data.get("layout", {}).pop("template", None)  # one shared template, not one per plot
        fid = f"fig{len(self.figs)}"
        self.figs.append({"id": fid, "fig": data})
        return f'<div><h3>{esc(title)}</h3><div id="{fid}" class="plot"></div></div>'

    def add(self, text: str) -> None:
        self.parts.append(text)


def _cards(items: list[tuple[str, str]]) -> str:
    return '<div class="cards">' + "".join(
        f'<div class="card"><b>{esc(v)}</b><span>{esc(k)}</span></div>' for k, v in items
        if v) + "</div>"


def _table(header: list[str], rows: list[list[tuple[str, float | None]]]) -> str:
    """A sortable table: each cell (text, sort value or None for text)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f'<td class="n" data-v="{v}">{esc(t)}</td>' if v is not None else f"<td>{esc(t)}</td>"
        for t, v in r) + "</tr>" for r in rows)
    return (f'<div class="scroll"><table class="sort"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def _model_section(page: Page, dev: M.DeviceSummary, m: M.ModelSummary) -> str:
    if m.model_id is None:
        title = f"Device {dev.device_id}: tasks outside models (eager ops, initialisation)"
        cards = [("op time, total", us(m.op_us_per_step)), ("tasks", str(m.tasks))]
    else:
        title = f"Device {dev.device_id}, model {m.model_id}" + (f' "{m.name}"' if m.name
                                                                 else "")
        it = m.iteration_time
        cards = [("iterations" + (f" ({m.replayed} replayed)" if m.replayed else ""),
                  str(m.iterations)),
                 ("Iteration Time, median", us(it.median) if it else ""),
                 ("Iteration Time, p90", us(it.p90) if it else ""),
                 ("device step (FP to end), median", us(m.device_time.median)
                  if m.device_time else ""),
                 ("Data Aug Bound, median (host)", us(m.data_aug_bound.median)
                  if m.data_aug_bound else ""),
                 ("device busy in steps", share(m.busy_share)),
                 ("op time per step", us(m.op_us_per_step)),
                 ("communication per step", us(m.communication_us_per_step)
                  if m.communication_us_per_step else ""),
                 ("memcpy per step", us(m.memcpy_us_per_step) if m.memcpy_us_per_step else "")]
    per = "per step" if m.model_id is not None else "total"
    plots = [page.figure(F.step_breakdown(dev, m)) if m.model_id is not None else "",
             page.figure(F.top_op_types(dev, m)), page.figure(F.top_ops(dev, m)),
             page.figure(F.pipes(dev, m))]
    ops = _table(["Op", "OP Type", "Task Type", f"tasks {per}", f"time {per} (us)",
                  "input shapes"],
                 [[(o.name, None), (o.op_type, None), (o.task_type, None),
                   (f"{o.per_step_count:g}", o.per_step_count),
                   (f"{o.per_step_us:.3f}", o.per_step_us), (o.input_shapes, None)]
                  for o in m.ops[:200]])
    more = f'<p class="note">{len(m.ops) - 200} more ops in the summary JSON.</p>' \
        if len(m.ops) > 200 else ""
    return (f"<section><h2>{esc(title)}</h2>{_cards(cards)}"
            f'<div class="grid">{"".join(p for p in plots if p)}</div>'
            f"<h3>Ops (click a header to sort)</h3>{ops}{more}</section>")


def _advice(dev: M.DeviceSummary) -> str:
    if not dev.advice:
        return f'<p class="note">{esc(dev.advice_note or "No finding.")}</p>'
    items = []
    for line in dev.advice:
        text = esc(line)
        rule, _, rest = text.partition(": ")
        items.append(f"<li><b>{rule}</b>: {rest}</li>" if rest else f"<li>{text}</li>")
    return f'<ul class="advice">{"".join(items)}</ul>'


def _diff_section(page: Page, d: D.Diff) -> str:
    out = [f"<section><h2>Against the baseline {esc(d.base)}</h2>"]
    for c in d.collection:
        out.append(f'<p class="note">Collection changed: {esc(c)}</p>')
    for x in d.missing:
        out.append(f'<p class="up">Missing in this run: {esc(x)}</p>')
    for md in d.models:
        who = "tasks outside models" if md.new_model is None else \
            f"model {md.new_model}" + (f' "{md.name}"' if md.name else "")
        out.append(f"<h3>Device {md.device_id}, {esc(who)}</h3><p>{esc(explain(md))}</p>")
        out.append(_table(["Metric", "side", "base", "new", "change", "%"],
                          [[(x.label, None), (x.side, None), (us(x.base), x.base),
                            (us(x.new), x.new), (signed_us(x.delta), x.delta),
                            (pct(x.pct), x.pct)] for x in md.metrics
                           if x.base is not None or x.new is not None]))
        out.append(page.figure(F.diff_types(md)))
        if md.ops:
            out.append("<h3>Changed ops</h3>" + _table(
                ["Op", "OP Type", "status", "base (us)", "new (us)", "change (us)",
                 "of step change", "shapes"],
                [[(shorten(o.name, 90), None), (o.op_type, None), (o.status, None),
                  (f"{o.base_us:.3f}", o.base_us), (f"{o.new_us:.3f}", o.new_us),
                  (f"{o.delta_us:+.3f}", o.delta_us), (share(o.share), o.share),
                  (f"{o.base_shapes} -> {o.new_shapes}" if o.base_shapes != o.new_shapes
                   else o.new_shapes, None)] for o in md.ops[:100]]))
    out.append("</section>")
    return "".join(out)


def build_page(s: M.Summary, d: D.Diff | None = None) -> str:
    page = Page()
    c = s.collection
    made = (f"emulated Ascend 910 by msprof_cli {c.msprof_cli}, TensorFlow {c.tensorflow}"
            if c.emulated else f"{c.chip} data without an msprof_cli run record")
    if d is not None:
        page.add(_diff_section(page, d))
    for dev in s.devices:
        for m in dev.models:
            page.add(_model_section(page, dev, m))
    memory = [page.figure(F.memory_breakdown(s.devices))] + [
        page.figure(F.memory_over_step(dev, mm)) for dev in s.devices
        if dev.memory is not None for mm in dev.memory.models]
    if any(memory):
        page.add('<section><h2>Device memory (emulated)</h2><p class="note">What GE would '
                 "allocate for the captured graphs on the chosen chip: the variables and each "
                 "graph's planned feature map (docs/summary.md section 7).</p>"
                 f'<div class="grid">{"".join(memory)}</div></section>')
    system = [page.figure(F.activity(s.devices)), page.figure(F.overlap(s.devices))]
    if any(system):
        page.add(f'<section><h2>Devices</h2><div class="grid">{"".join(system)}</div>'
                 "</section>")
    advice = "".join(f"<h3>{esc(dev.prof)} device {dev.device_id}</h3>{_advice(dev)}"
                     for dev in s.devices)
    if s.devices:
        page.add(f"<section><h2>Tuning advice (top findings)</h2>{advice}"
                 '<p class="note">The whole report: msprof export --advice full; the rules '
                 "and every op: summary/prof_rule_N.json.</p></section>")
    warn = "".join(f"<p>Warning: {esc(w)}</p>" for w in s.warnings)
    template = json.loads(json.dumps(pio.templates[TEMPLATE].to_plotly_json(),
                                     cls=PlotlyJSONEncoder))
    figs = json.dumps(page.figs, separators=(",", ":")).replace("</", "<\\/")
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>msprof report: {esc(s.source)}</title><style>{CSS}</style>"
        f"<script>{get_plotlyjs()}</script></head><body>"
        f"<header><h1>msprof report</h1><p>{esc(s.source)}</p><p>{esc(made)}; made by "
        f"msprof_cli {esc(__version__)}. Device times are the emulated NPU's (from the real "
        f"shapes); Data Aug Bound and the host gaps are measured.</p>{warn}</header>"
        f"<main>{''.join(page.parts)}</main>"
        f"<script>const TEMPLATE={json.dumps(template, separators=(',', ':'))};"
        f"const FIGS={figs};{DRAW_JS}{SORT_JS}</script></body></html>\n")


def write_report(s: M.Summary, out: Path, d: D.Diff | None = None) -> Path:
    from msprof_cli.raw.control import write_text_atomic

    write_text_atomic(Path(out), build_page(s, d))
    return Path(out)
