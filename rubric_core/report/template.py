"""The report's Jinja2 template: one HTML file, its CSS and scripts inline, no network.

Autoescape is on for every value; the only unescaped inserts are plotly.js itself and
figure JSON made safe for a `<script>` block by `html.figure_json` (no `<`, `>` or `&`
left in it). The Content-Security-Policy forbids every fetch: no connection, no image,
font or frame from anywhere, so even a string that got past the escaping could not reach
the network.
"""

from __future__ import annotations

__all__ = ["TEMPLATE"]

TEMPLATE = """{% macro table(rows) %}{% if rows %}<table><tr>{% for k in rows[0] %}<th>{{ k }}</th>{% endfor %}</tr>
{% for r in rows %}<tr>{% for v in r.values() %}<td>{{ v }}</td>{% endfor %}</tr>
{% endfor %}</table>{% endif %}{% endmacro %}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }} · {{ rubric.name }} v{{ rubric.version }} · Rubric Studio report</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#222}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f5f5f5}.num{text-align:right}
.metrics{display:flex;flex-wrap:wrap;gap:1rem}.metric{border:1px solid #ddd;border-radius:6px;padding:.5rem 1rem}
.metric b{display:block;font-size:1.4rem}pre{white-space:pre-wrap;background:#f7f7f7;padding:.5rem;max-height:30rem;overflow:auto}
.pass{color:#2e7d32}.fail{color:#c62828}.note{color:#666;font-size:.9rem}
details>summary{cursor:pointer}.inputs td.input{width:60%}
</style>
</head>
<body>
<h1>{{ title }}</h1>
<p class="note">Rubric Studio report, generated {{ generated }}. Opens offline: everything it needs is in this file.</p>

<h2>Rubric</h2>
<p><b>{{ rubric.name }}</b> version {{ rubric.version }}{% if rubric.note %} · {{ rubric.note }}{% endif %}</p>
<table>
<tr><th>#</th><th>criterion</th><th>weight</th><th>decided by</th></tr>
{% for c in criteria %}<tr><td class="num">{{ loop.index }}</td><td>{{ c.name }}</td><td class="num">{{ c.weight }}{% if c.penalty %} (penalty){% endif %}</td><td>{{ c.check if c.check else "judge" }}</td></tr>
{% endfor %}</table>

<h2>Summary</h2>
<div class="metrics">
{% for label, value in metrics %}<div class="metric">{{ label }}<b>{{ value }}</b></div>
{% endfor %}</div>
{% if by_status %}<p>{% for status, n in by_status.items() %}{{ status }}: {{ n }}{% if not loop.last %} · {% endif %}{% endfor %}</p>{% endif %}
<p class="note">Mean score: {{ mean_basis }}.</p>
<p class="note">{{ final_pass_rule }}.</p>
{{ table(rates) }}
{% for chart in charts %}<div class="chart" data-fig="{{ chart }}"></div>
{% endfor %}

{% if comparison %}<h2>Compared with experiment {{ against }}</h2>
<p class="note">A is experiment {{ ident }}, B experiment {{ against }}: pass rates over the source passes both graded.</p>
{{ table(comparison) }}{% endif %}

<h2>Agreement with human labels</h2>
{% if agreement %}{{ table(agreement) }}
<p>Confusion (overall, judge as predictor):</p>{{ table(confusion) }}
{% else %}<p class="note">No agreement figures: {{ agreement_note }}.</p>{% endif %}
{% if against_agreement %}<h2>Agreement with experiment {{ against }}</h2>{{ table(against_agreement) }}{% endif %}

<h2>Inputs ({{ items|length }})</h2>
<p class="note">Click an input to read its drafts, verdicts and gaps{% if item_charts %}, with its timeline and heatmap{% endif %}.</p>
<table class="inputs">
<tr><th>#</th><th>input</th><th>status</th><th>score</th><th>passes</th><th>final verdicts</th></tr>
{% for item in items %}<tr>
<td class="num">{{ loop.index }}</td>
<td class="input"><details><summary>{{ item.snippet }}</summary>
<p class="note">run {{ item.run_id }}</p><pre>{{ item.input }}</pre>
{% for chart in item.charts %}<div class="chart" data-fig="{{ chart }}"></div>{% endfor %}
{% for p in item.passes %}<h3>{{ p.label }}: {{ p.result }}{% if p.score is not none %} · score {{ p.score }}{% endif %}</h3>
{% if p.explanation %}<p>{{ p.explanation }}</p>{% endif %}
<pre>{{ p.draft }}</pre>
<table><tr><th>criterion</th><th>verdict</th><th>gap</th></tr>
{% for v in p.criteria %}<tr><td>{{ v.name }}</td><td class="{{ v.css }}">{{ v.word }}</td><td>{{ v.gap }}</td></tr>{% endfor %}
</table>{% endfor %}
</details></td>
<td>{{ item.status }}</td><td class="num">{{ item.score }}</td><td class="num">{{ item.passes|length }}</td><td>{{ item.marks }}</td>
</tr>
{% endfor %}</table>

{% for name, figure in figures %}<script type="application/json" id="{{ name }}">{{ figure }}</script>
{% endfor %}
<script>{{ plotly_js }}</script>
<script>
(function () {
  var theme = JSON.parse(document.getElementById("plotly-theme").textContent);
  function draw(el) {
    if (el.getAttribute("data-drawn")) return;
    el.setAttribute("data-drawn", "1");
    var figure = JSON.parse(document.getElementById(el.getAttribute("data-fig")).textContent);
    figure.layout.template = theme;
    Plotly.newPlot(el, figure.data, figure.layout, {displaylogo: false, responsive: true});
  }
  document.querySelectorAll(".chart").forEach(function (el) {
    if (!el.closest("details")) draw(el);
  });
  document.querySelectorAll("details").forEach(function (d) {
    d.addEventListener("toggle", function () {
      if (d.open) d.querySelectorAll(".chart").forEach(draw);
    });
  });
})();
</script>
</body>
</html>
"""
