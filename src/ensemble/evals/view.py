"""`ensemble view`: one self-contained HTML page to read a run's samples (or compare two runs).

The page is a single file that opens from disk in any browser, offline: its CSS and JavaScript
are inline (from `view.css` and `view.js` beside this module, shipped as package data), its
images are base64 PNGs, and the run's records are embedded as one JSON document in a
`<script type="application/json">` block. A Content-Security-Policy forbids every load except
inline code and data: images, so nothing in the page can reach the network, and the JavaScript
puts model text into the page only as text (never as HTML).

Embedded data (compact, so a MathQA run of 2,985 questions x 20 samples x 3 temperatures stays
a file a browser opens; see docs/viewing.md for its size and render time):

    strings    every distinct prompt and reply text, once (greedy replies repeat)
    questions  [id, choices, correct, posterior, [prompt string per run], spellings]
               (spellings: open answers, {answer: {as written: count}} of the first run;
               else null)
    rows       [{id, label, t, member, pooled}] in order: the rows of every question. A run is
               a set of rows x cells: each member of the run (a temperature of one model, or a
               named member at its t) and, where the run has one, the ensemble under each rule
               (t null; `pooled`: its votes pool the members' samples, shown in their rows)
    cells      [question, run, t, samples, votes, member, row] for every (question, run, row)
               samples: [index, text string, answer (null: invalid), tokens]
               votes:   [n, aggregator, decision, correct, tie, counts, by_member]
                        (votes.jsonl; by_member: the pooled votes per member, else null)

The page renders one page of questions at a time (vanilla JS), with filters (wrong decisions,
invalid replies, split votes, text search) and sorting by agreement.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ensemble.errors import InputError
from ensemble.jsonio import write_atomic
from ensemble.report import inline_html

from .records import run_slug
from .rundir import RunFolder
from .schemas import CalibrationSummary, EvalSummary

__all__ = ["RunRecords", "ViewResult", "build_view", "records_of", "view_path"]

VIEW_FILE = "view.html"


Key = tuple[str, float | None, str | None]  # (question id, t, member: None for one model)


@dataclass(frozen=True)
class RunRecords:
    """A run folder (`evals.rundir.read_run`) with its records indexed as the viewer needs
    them."""

    folder: RunFolder
    samples: dict[Key, list[Any]]  # (id, t, member) -> SampleRecord, by index
    votes: dict[Key, list[Any]]  # (id, t, member) -> VoteRecord

    @property
    def path(self) -> Path:
        return self.folder.path

    @property
    def kind(self) -> str:
        return self.folder.kind

    @property
    def doc(self) -> EvalSummary | CalibrationSummary:
        return self.folder.doc

    @property
    def questions(self) -> list[Any]:
        return list(self.folder.questions)

    @property
    def name(self) -> str:
        return self.path.resolve().name


@dataclass(frozen=True)
class ViewResult:
    """What `build_view` wrote."""

    path: Path
    questions: int
    samples: int
    bytes: int


def _t(t: float | None) -> float | None:
    return None if t is None else round(float(t), 9)


def records_of(folder: RunFolder) -> RunRecords:
    """A run folder's records indexed by (question id, t, member)."""
    samples: dict[Key, list[Any]] = {}
    for s in folder.samples:
        samples.setdefault((s.id, _t(s.t), s.member), []).append(s)
    for rows in samples.values():
        rows.sort(key=lambda s: s.sample)
    votes: dict[Key, list[Any]] = {}
    for v in folder.votes:
        votes.setdefault((v.id, _t(v.t), v.member), []).append(v)
    return RunRecords(folder, samples, votes)


def view_path(runs: list[RunRecords], out: str | os.PathLike[str] | None = None) -> Path:
    """Where the page goes: --out, RUN/view.html, or RUN_A/compare-<RUN_B>.html."""
    if out is not None:
        return Path(out)
    if len(runs) == 1:
        return runs[0].path / VIEW_FILE
    return runs[0].path / f"compare-{run_slug(runs[1].name)}.html"


def build_view(runs: list[str | os.PathLike[str]], *, out: str | os.PathLike[str] | None = None,
               page_size: int = 20) -> ViewResult:
    """Write the viewer page for one run, or for two runs side by side on their shared
    (question id, t); returns where it went and what it holds."""
    if not 1 <= len(runs) <= 2:
        raise InputError("give one run folder, or two to compare")
    if page_size < 1:
        raise InputError("--page-size must be >= 1")
    from .rundir import read_run

    recs = [records_of(read_run(r)) for r in runs]
    data = _data(recs)
    if not data["cells"]:
        raise InputError(f"{recs[0].path} and {recs[1].path} share no question at a common "
                         "temperature (matched by question id, t and, for mixed ensembles, "
                         "member): nothing to compare"
                         if len(recs) == 2 else f"{recs[0].path} has no samples")
    data["page_size"] = page_size
    page = render_page(recs, data)
    path = view_path(recs, out)
    _refuse_foreign_file(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, page)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}; choose another --out"
                         ) from None
    n_samples = sum(len(c[3]) for c in data["cells"])
    return ViewResult(path, len(data["questions"]), n_samples, len(page.encode("utf-8")))


def _refuse_foreign_file(path: Path) -> None:
    """A page replaces only a page: a file there that `ensemble view` did not write (its
    generator tag in the head) is someone's, refused in one line."""
    if not path.exists():
        return
    head = b""
    if path.is_file():
        try:
            with path.open("rb") as f:
                head = f.read(4096)
        except OSError:
            pass
    if _GENERATOR.encode() not in head:
        raise InputError(f"--out {path} is {'a folder' if path.is_dir() else 'a file'} "
                         "ensemble view did not write; the page would replace it: give a new "
                         "path for the page")


_GENERATOR = '<meta name="generator" content="ensemble view">'


# -- data -------------------------------------------------------------------------------------
def _lam_js(v: float | None) -> float | str | None:
    if v is None:
        return None
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return float(v)


def _run_info(r: RunRecords, label: str) -> dict[str, Any]:
    doc = r.doc
    temps = sorted({t for _, t, _ in r.samples if t is not None})
    ens = doc.ensemble if isinstance(doc, EvalSummary) else None
    members = [m.label for m in ens.members] if ens else []
    info: dict[str, Any] = {
        "label": label, "name": r.name, "kind": r.kind, "temps": temps,
        "model": doc.model, "task": r.folder.title, "created": r.folder.created,
        # the named members in the run's order, the ensemble first: the order of the rows
        "members": ["ensemble", *members] if members else [],
    }
    if isinstance(doc, EvalSummary):
        ns = sorted({v.n for rows in r.votes.values() for v in rows})
        aggs: list[str] = []
        for rows in r.votes.values():
            for v in rows:
                if v.aggregator not in aggs:
                    aggs.append(v.aggregator)
        info.update(ns=ns, aggs=aggs)
    else:
        info.update(ns=[], aggs=[],
                    fits={f"{_t(f.t):g}": [_lam_js(f.lam), f.bias] for f in doc.fits},
                    first=(r.questions[0].choices[0] if r.questions else "L"))
    return info


Row = tuple[float | None, str | None]  # (t, member): a row of every question


def _rows(recs: list[RunRecords], keys: list[Key], order: list[str]) -> list[Row]:
    """The rows shown, in the first run's order: its members as the run lists them (the
    ensemble first), each by temperature."""
    pos = {m: i for i, m in enumerate(order)}
    return sorted({(k[1], k[2]) for k in keys},
                  key=lambda r: (pos.get(r[1] or "", -1), -1.0 if r[0] is None else r[0]))


def _row_doc(row: Row, recs: list[RunRecords]) -> dict[str, Any]:
    """A row as the page names it: `id` in the address (#t=...), `label` beside its cells."""
    t, member = row
    when = None if t is None else f"{t:g}"
    pooled = any(v.by_member for r in recs for (_, vt, vm), rows in r.votes.items()
                 if (vt, vm) == row for v in rows)
    return {"id": member or when, "t": t, "member": member, "pooled": pooled,
            "label": " · ".join(x for x in (member, when and f"t = {when}") if x)}


def _data(recs: list[RunRecords]) -> dict[str, Any]:
    strings: list[str] = []
    sid: dict[str, int] = {}

    def intern(text: str | None) -> int:
        if text is None:
            return -1
        i = sid.get(text)
        if i is None:
            i = sid[text] = len(strings)
            strings.append(text)
        return i

    by_id = [{q.id: q for q in r.questions} for r in recs]
    base = recs[0]

    def cell_keys(r: RunRecords) -> list[Key]:  # rows of votes alone (the ensemble's) too
        return [*r.samples, *(k for k in r.votes if k not in r.samples)]

    keys = [k for k in cell_keys(base) if k[0] in by_id[0]]
    if len(recs) == 2:
        other = set(cell_keys(recs[1]))
        keys = [k for k in keys if k in other and k[0] in by_id[1]]
    shared = {k[0] for k in keys}
    q_index: dict[str, int] = {}
    questions: list[list[Any]] = []
    for q in base.questions:  # the first run's order
        if q.id not in shared:
            continue
        q_index[q.id] = len(questions)
        questions.append([q.id, q.choices, q.correct, q.posterior,
                          [intern(m[q.id].prompt) for m in by_id],
                          q.meta.get("spellings") if isinstance(q.meta, dict) else None])
    runs = [_run_info(r, "AB"[i]) for i, r in enumerate(recs)]
    rows = _rows(recs, keys, runs[0]["members"])
    row_index = {row: i for i, row in enumerate(rows)}
    cells: list[list[Any]] = []
    for key in sorted(keys, key=lambda k: (q_index[k[0]], row_index[k[1], k[2]])):
        for ri, r in enumerate(recs):
            aggs = runs[ri]["aggs"]
            smp = [[s.sample, intern(s.text), s.answer, s.tokens]
                   for s in r.samples.get(key, [])]
            vts = [[v.n, aggs.index(v.aggregator), v.decision,
                    None if v.correct is None else int(v.correct), int(v.tie),
                    v.counts, v.by_member] for v in r.votes.get(key, [])]
            cells.append([q_index[key[0]], ri, key[1], smp, vts, key[2], row_index[key[1],
                                                                                   key[2]]])
    from ensemble import __version__

    from .records import now_iso

    return {"runs": runs, "rows": [_row_doc(row, recs) for row in rows], "strings": strings,
            "questions": questions, "cells": cells, "generated": now_iso(),
            "version": __version__}


def embed_json(obj: Any) -> str:
    """JSON safe inside <script type="application/json">: no `<`, `>` or `&` appears raw (so
    `</script>` or `<!--` in a model's reply cannot end or alter the block), nor U+2028/2029."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


# -- page -------------------------------------------------------------------------------------
def _asset(name: str) -> str:
    return resources.files("ensemble.evals").joinpath(name).read_text(encoding="utf-8")


def _png(path: Path, alt: str) -> str:
    if not path.is_file():
        return ""
    b64 = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


def _num(v: Any, nd: int = 4) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if isinstance(v, float):
        return f"{v:.{nd}g}" if abs(v) >= 1e4 else f"{v:.{nd}f}"
    return str(v)


def _table(head: list[str], rows: list[list[str]]) -> str:
    """An HTML table; a column empty in every row (a member column for a run whose rows are
    temperatures of one model) is left out."""
    e = html.escape
    keep = [i for i in range(len(head)) if any(r[i] for r in rows)] if rows else list(
        range(len(head)))
    return ("<table class=\"res\"><thead><tr>" + "".join(f"<th>{e(head[i])}</th>" for i in keep)
            + "</tr></thead><tbody>" + "".join(
                "<tr>" + "".join(f"<td>{e(r[i])}</td>" for i in keep) + "</tr>" for r in rows)
            + "</tbody></table>")


def _facts(items: list[tuple[str, Any]]) -> str:
    e = html.escape
    return "<dl class=\"facts\">" + "".join(
        f"<div><dt>{e(k)}</dt><dd>{e(str(v))}</dd></div>" for k, v in items
        if v not in (None, "")) + "</dl>"


def _eval_header(r: RunRecords) -> str:
    from .outputs import contrast_text

    d = r.folder.summary
    box = d.layout.utility
    rows = []
    for x in d.results:
        ci = x.utility_ci if box else x.ci
        ci_s = "–" if not ci else f"[{_num(ci[0], 3)}, {_num(ci[1], 3)}]"
        rows.append([x.member or "",
                     "–" if x.t is None else f"{x.t:g}", str(x.n), x.aggregator,
                     _num(x.utility if box else x.accuracy),
                     _num(x.utility_sem if box else x.sem), ci_s, str(x.items)])
    head = ["member", "t", "n", "aggregator",
            "utility (±1)" if box else "accuracy", "SEM", "95% interval", "items"]
    diffs = []
    for c in d.contrasts:
        ci = c.utility_ci if box else c.ci
        diffs.append([contrast_text(c), c.aggregator,
                      _num(c.utility_difference if box else c.difference),
                      "–" if not ci else f"[{_num(ci[0], 3)}, {_num(ci[1], 3)}]"])
    cost = d.cost_usd
    facts = [("task", r.folder.title), ("model", d.model),
             ("date", d.created), ("ensemble", d.version),
             ("samples per question", d.samples_per_question), ("seed", d.seed),
             ("invalid replies", f"{100 * d.invalid_rate:.1f}%"),
             ("requests", d.requests),
             ("from store", f"{d.samples.from_store} of {d.samples.total}"),
             ("cost", "unknown" if cost is None else f"${cost:.4f}")]
    # what the run's scoring says of itself (e.g. a soft rule counted as hard votes: its
    # logprobs showed no signal), and its warnings
    said = "".join(f"<p class=\"metric\">{html.escape(x)}</p>"
                   for x in [*d.notes, *(f"warning: {w}" for w in d.warnings)])
    return (_facts(facts) + f"<p class=\"metric\">{html.escape(d.metric)}</p>" + said
            + "<div class=\"tp\">" + _table(head, rows)
            + (_table(["paired difference", "aggregator", "estimate", "95% interval"],
                                     diffs) if diffs
               else "")
            + _png(r.path / "accuracy.png", "accuracy against n") + "</div>")


def _calibration_header(r: RunRecords) -> str:
    d = r.doc
    assert isinstance(d, CalibrationSummary)
    meta = d.meta
    rows = []
    for f in d.fits:
        ci: list[float | None] = [*f.ci] if f.ci else [None, None]
        rows.append([f"{f.t:g}", _num(f.lam), _num(f.se),
                     f"[{_num(ci[0], 3)}, {_num(ci[1], 3)}]", _num(f.bias, 3),
                     "yes" if f.separated else "no", str(f.n_valid)])
    facts = [("task", meta.task), ("model", d.model),
             ("date", meta.created), ("ensemble", meta.version),
             ("mode", d.mode), ("samples per question", meta.samples_per_question),
             ("questions", meta.questions), ("seed", meta.seed),
             ("invalid replies", d.invalid)]
    parts = [_facts(facts), f"<p class=\"metric\">{inline_html(d.units)}</p>",
             _table(["t", "λ", "SE", "95% interval", "bias b", "separated", "valid answers"],
                    rows)]
    j = d.joint
    if j:
        parts.append(f"<p>λ(t) = λ₁/t: λ₁ = {_num(j.lam1)}, test p = "
                     f"{_num(j.lrt_pvalue, 3)} "
                     f"({'consistent' if j.holds else 'rejected'}).</p>")
    rec = d.recommendation
    if rec:
        parts.append(f"<p><b>{html.escape(rec.summary)}</b></p>")
        if rec.ensemble:
            parts.append(f"<pre>{html.escape(rec.ensemble)}</pre>")
    report = r.path / "report.html"
    if report.is_file():
        parts.append("<p>Full report with the terms explained: "
                     f"<code>{html.escape(str(report))}</code></p>")
    parts.append(_png(r.path / "qr_curves.png", "quantal-response fits"))
    return "".join(parts)


EVAL_HELP = ("Each question with every sample drawn: the reply with its parsed answer "
             "<mark>highlighted</mark> (red: wrong, gray: invalid), and the vote of the first n "
             "samples by index for each n and aggregator (the tables above average over many "
             "random n-subsets instead). Filters keep a question when one of its rows shown "
             "matches all the filters ticked.")
CALIBRATION_HELP = ("Each calibration question with every sample drawn at each temperature: "
                    "the reply with its parsed answer <mark>highlighted</mark> (gray: invalid), "
                    "beside the question's exact posterior and the share of its answers that "
                    "chose the first option, which the fit of λ compares with ψ_λ(posterior). "
                    "Filters keep a question when one of its rows shown matches all the "
                    "filters ticked.")


def _paired(recs: list[RunRecords]) -> str:
    """The paired table `ensemble compare` prints for two eval runs (B − A on their shared
    questions), or why there is none."""
    from .compare import compare_runs

    if any(r.kind != "eval" for r in recs):
        return ""
    try:
        doc = compare_runs(recs[0].folder, recs[1].folder)
    except InputError as exc:
        return ("<section class=\"paired\"><h2>Paired differences</h2><p>No paired table: "
                f"{html.escape(str(exc))}</p></section>")
    box = "utility_diff" in doc["results"][0]
    pre = "utility_" if box else ""
    head = ["who", "t", "n", "aggregator", "A", "B", "B − A", "SEM", "95% for the task",
            f"95% for these {doc['shared']['items']}"]
    rows = []
    for r in doc["results"]:
        ci, ciq = r[pre + "ci"], r[pre + "ci_questions"]
        rows.append([r.get("member") or "", "–" if r["t"] is None else f"{r['t']:g}",
                     str(r["n"]), r["aggregator"], _num(r[pre + "a"]), _num(r[pre + "b"]),
                     f"{r[pre + 'diff']:+.4f}", _num(r[pre + "sem"]),
                     f"[{ci[0]:+.3f}, {ci[1]:+.3f}]", f"[{ciq[0]:+.3f}, {ciq[1]:+.3f}]"])
    sh = doc["shared"]
    what = ("expected utility, ±1 units" if box else "accuracy")
    return ("<section class=\"paired\"><h2>Paired differences, B − A</h2>"
            f"<p class=\"metric\">On the {sh['items']} {sh['unit']} both runs share ({what}); "
            "the same computation as <code>ensemble compare</code>: paired intervals for the "
            "task and for the shared questions.</p>" + _table(head, rows) + "</section>")


def render_page(recs: list[RunRecords], data: dict[str, Any]) -> str:
    """The HTML page (template, CSS, JS and data in one string)."""
    e = html.escape
    heads = []
    for i, r in enumerate(recs):
        label = f"<span class=\"tag\">{'AB'[i]}</span> " if len(recs) == 2 else ""
        body = _eval_header(r) if r.kind == "eval" else _calibration_header(r)
        heads.append(f"<section class=\"run\"><h2>{label}{e(r.kind)}: {e(str(r.path))}</h2>"
                     f"{body}</section>")
    title = ("compare " + " vs ".join(r.name for r in recs) if len(recs) == 2
             else f"{recs[0].kind} {recs[0].name}")
    parts = {"TITLE": e(f"ensemble view: {title}"), "CSS": _asset("view.css"),
             "JS": _asset("view.js"), "HEADER": "".join(heads),
             "HELP": EVAL_HELP if any(r.kind == "eval" for r in recs) else CALIBRATION_HELP,
             "PAIRED": _paired(recs) if len(recs) == 2 else "",
             "COLUMNS": "two" if len(recs) == 2 else "one", "DATA": embed_json(data)}
    return re.sub(r"\{\{([A-Z]+)\}\}", lambda m: parts[m.group(1)], _asset("view.html"))
