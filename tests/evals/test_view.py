"""`ensemble view`: the page's data, its safety, bad input, and a real render in headless Chromium.

Runs come from real `ensemble eval` / `ensemble calibrate` runs against the simulated server
(real HTTP, the real store); the escaping checks write a run whose replies and prompts carry
hostile markup through the same record writers an eval uses.
"""

from __future__ import annotations

import asyncio
import html
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from ensemble.evals.calibrate import run_calibration
from ensemble.evals.records import (
    model_members,
    read_samples,
    write_questions,
    write_samples,
    write_votes,
)
from ensemble.evals.runner import RunOptions, run_eval
from ensemble.evals.schemas import dump
from ensemble.evals.spec import calibration_spec, load_spec, one_model
from ensemble.evals.view import build_view, embed_json
from ensemble.jsonio import loads
from ensemble.providers.options import ProviderOptions
from ensemble.sampling.types import Sample
from ensemble.tasks import Question
from ensemble.testing import SimulatedServer

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (apt-get install chromium): render checks "
                             "need a real browser")


def _eval(out: Path, srv: SimulatedServer, **kw) -> dict:
    spec = one_model("boxball", "openai/sim-expert", kw.pop("t", (0.5, 1.0)), (1, 3),
                     api_base=srv.base_url, samples=5, limit=3, bootstrap=100, **kw)
    return dump(asyncio.run(run_eval(spec, RunOptions(out=str(out)))))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two boxball eval runs on the same 3 scenarios (planted λ₁ = 1 and 6, 10% invalid
    replies in the first) and a calibration run on 30 questions."""
    base = tmp_path_factory.mktemp("runs")
    with SimulatedServer(lam1=1.0, seed=1, invalid_rate=0.1) as srv:
        _eval(base / "a", srv)
    with SimulatedServer(lam1=6.0, seed=2) as srv:
        _eval(base / "b", srv, t=(1.0,))
        cal = calibration_spec("openai/sim-expert", (0.5, 1.0), samples=4, limit=30,
                               n_budget=3)
        asyncio.run(run_calibration(cal, RunOptions(
            provider=ProviderOptions(api_base=srv.base_url, transport=srv.transport()),
            out=str(base / "cal"))))
    return base


def _data(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S)
    assert m is not None
    return json.loads(m.group(1))


def _chromium(args: list[str], tmp: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--disable-quic", "--no-first-run", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp}", *args], capture_output=True, text=True,
                          timeout=timeout)


def _groups(samples) -> int:
    """Rows the page shows for one (question, t): identical replies are shown once."""
    return len({(s.text, s.answer) for s in samples})


# -- the data ---------------------------------------------------------------------------------
def test_page_embeds_every_sample_and_vote_of_the_run(runs):
    res = build_view([runs / "a"])
    assert res.path == runs / "a" / "view.html"
    data = _data(res.path)
    samples = list(read_samples(runs / "a"))
    assert res.samples == len(samples) == sum(len(c[3]) for c in data["cells"])
    ids = {q[0] for q in data["questions"]}
    assert ids == {s.id for s in samples} and res.questions == len(ids) == 6  # 3 scenarios x 2
    strings = data["strings"]
    got = Counter((data["questions"][c[0]][0], c[2], s[0], strings[s[1]], s[2])
                  for c in data["cells"] for s in c[3])
    assert got == Counter((s.id, s.t, s.sample, s.text, s.answer) for s in samples)
    # every vote of votes.jsonl, with its decision
    votes = [json.loads(x) for x in (runs / "a" / "votes.jsonl").read_text().splitlines()]
    aggs = data["runs"][0]["aggs"]
    emb = Counter((data["questions"][c[0]][0], c[2], v[0], aggs[v[1]], v[2])
                  for c in data["cells"] for v in c[4])
    assert emb == Counter((v["id"], v["t"], v["n"], v["aggregator"], v["decision"])
                          for v in votes)
    assert any(s[2] is None for c in data["cells"] for s in c[3])  # invalid replies kept


def test_compare_keeps_the_shared_questions_and_temperatures(runs):
    res = build_view([runs / "a", runs / "b"])
    assert res.path == runs / "a" / "compare-b.html"
    data = _data(res.path)
    assert [r["label"] for r in data["runs"]] == ["A", "B"]
    keys = {(data["questions"][c[0]][0], c[2], c[1]) for c in data["cells"]}
    a = {(s.id, s.t) for s in read_samples(runs / "a")}
    b = {(s.id, s.t) for s in read_samples(runs / "b")}
    shared = a & b
    assert shared and all(t == 1.0 for _, t in shared)  # run b has t = 1 only
    assert keys == {(i, t, r) for i, t in shared for r in (0, 1)}


def test_calibration_run_writes_records_and_its_view_shows_the_fit(runs):
    cal = runs / "cal"
    assert (cal / "questions.jsonl").exists() and not (cal / "votes.jsonl").exists()
    samples = list(read_samples(cal))
    assert len(samples) == 30 * 2 * 4
    assert Counter((s.id, s.t) for s in samples) == Counter(
        {k: 4 for k in {(s.id, s.t) for s in samples}})
    doc = loads((cal / "calibration.json").read_text())
    data = _data(build_view([cal]).path)
    run = data["runs"][0]
    assert run["kind"] == "calibration" and run["first"] == "L"
    for f in doc["fits"]:  # ±∞ (separated answers) travel as "inf" / "-inf"
        lam = run["fits"][f"{f['t']:g}"][0]
        assert lam == ("inf" if f["lam"] == math.inf else pytest.approx(f["lam"]))
    # the share of "L" per (question, t) in the page equals the records'
    share = Counter((s.id, s.t) for s in samples if s.answer == "L")
    emb = Counter()
    for c in data["cells"]:
        emb[(data["questions"][c[0]][0], c[2])] += sum(s[2] == "L" for s in c[3])
    assert +emb == +share


# -- safety -----------------------------------------------------------------------------------
HOSTILE = ('</script><script>document.title="pwned"</script><!-- <img src="http://127.0.0.1:{port}'
           '/img.png"> <link rel=stylesheet href="https://127.0.0.1:{port}/x.css"> & \u2028 '
           '<answer>A</answer>')


def test_embedded_json_cannot_end_its_script_block():
    text = HOSTILE.format(port=1)
    enc = embed_json({"t": [text, "a&b", "<!--", "\u2029"]})
    assert "<" not in enc and ">" not in enc and "&" not in enc and "\u2028" not in enc
    assert json.loads(enc) == {"t": [text, "a&b", "<!--", "\u2029"]}


def _hostile_run(out: Path, port: int) -> None:
    """A run whose prompt and replies try to load from a server at `port` and break out."""
    bad = HOSTILE.format(port=port)
    qs = [Question(id=f"q{i}<b>", prompt=f"Pick one. {bad}", choices=("A", "B"), correct="A")
          for i in range(3)]
    rows, answers = [], np.empty((1, 3, 3), dtype=object)
    for qi in range(3):
        row = []
        for k in range(3):
            a = "A" if k else None
            row.append(Sample(key="x", index=k, text=bad if k else "no answer", answer=a))
            answers[0, qi, k] = a
        rows.append(row)
    out.mkdir()
    write_questions(out, qs)
    write_samples(out, qs, (1.0,), rows, answers)
    write_votes(out, qs, model_members((1.0,), (1, 3)), answers, rule="plurality")
    (out / "summary.json").write_text(json.dumps(_empty_summary("jsonl", "m<i>", out)))


def _empty_summary(task: str, model: str, out: Path) -> dict:
    """A summary.json with every field (`EvalSummary`) and no result row: records written
    here, without a draw."""
    from ensemble import ProviderOptions

    return {"task": task, "model": model, "metric": "accuracy", "estimator": "none",
            "temperatures": [1.0], "ns": [1, 3], "samples_per_question": 3, "bootstrap": 2,
            "seed": 0, "population": {"items": 0, "total": 1, "unit": "questions",
                                      "fraction": 0.0},
            "intervals": {}, "results": [], "contrasts": [], "invalid_rate": 0.0,
            "invalid_rate_by_t": [], "invalid_policy": "", "warnings": [], "adaptive": [],
            "ensemble": None, "aggregators": ["plurality"], "lam1": None, "layout": {},
            "requests": 0, "cost_usd": None,
            "cost": {"now_usd": None, "stored_samples_usd": None, "note": ""},
            "tokens": {"prompt": 0, "completion": 0}, "samples": {"total": 0, "from_store": 0},
            "retries": 0, "errors": 0, "rate_limited": 0, "wall_time_s": 0.0,
            "analysis_time_s": 0.0, "run_dir": str(out), "data": {},
            "failed": {"count": 0, "of": 0, "ids": [], "reasons": {}, "file": None},
            "notes": [], "provider": ProviderOptions().public(), "endpoint": None,
            "served_by": None, "created": "now", "version": "test"}


def test_page_loads_nothing_from_outside(runs):
    text = build_view([runs / "a"]).path.read_text(encoding="utf-8")
    outside = text[:text.index('<script type="application/json"')] + text[text.index(
        "</script>", text.index('id="data"')):]
    assert not re.search(r'(src|href)\s*=\s*["\']?\s*(https?:)?//', outside, re.I)
    for needle in ("@import", "url(", "fetch(", "XMLHttpRequest", "WebSocket", "import(",
                   "EventSource", "sendBeacon", "<link", "<iframe"):
        assert needle not in outside, needle
    assert "Content-Security-Policy" in outside and "default-src 'none'" in outside
    assert text.count("<script") == 2  # the data block and the inline code, nothing else


@needs_chromium
def test_hostile_text_is_shown_as_text_and_fetches_nothing(tmp_path):
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        _hostile_run(tmp_path / "run", srv.server_address[1])
        page = build_view([tmp_path / "run"]).path
        dom = _chromium(["--virtual-time-budget=3000", "--dump-dom", page.as_uri()],
                        tmp_path / "profile").stdout
    finally:
        srv.shutdown()
    assert hits == []
    assert "<title>ensemble view" in dom and "pwned" not in dom.split("<body")[0]
    assert 'data-render-ms="' in dom  # the page's code ran to the end
    body = dom[dom.index('<main id="list">'):dom.index("</main>")]
    assert "<script>" not in body and "<img" not in body  # the markup stayed text
    assert html.escape("</script><script>", quote=False) in body
    assert "q0&lt;b&gt;" in body


# -- a real render ----------------------------------------------------------------------------
@needs_chromium
def test_chromium_renders_questions_and_answers(runs, tmp_path):
    import matplotlib.image as mpimg

    page = build_view([runs / "a"], page_size=50).path
    dom = _chromium(["--dump-dom", page.as_uri()], tmp_path / "p1").stdout
    body = dom[dom.index('<main id="list">'):dom.index("</main>")]
    samples = list(read_samples(runs / "a"))
    for qid in {s.id for s in samples}:
        assert f'<span class="qid">{qid}</span>' in body
    # one answer badge per distinct reply of each (question, t), with the parsed answer
    badges = re.findall(r'<span class="ans[^"]*">([^<]*)</span>', body)
    by_cell: dict = {}
    for s in samples:
        by_cell.setdefault((s.id, s.t), []).append(s)
    assert len(badges) == sum(_groups(v) for v in by_cell.values())
    shown = Counter(b.split(" ×")[0] for b in badges)
    assert set(shown) == {s.answer or "invalid" for s in samples}
    assert body.count("<mark>") >= sum(1 for b in badges if not b.startswith("invalid"))
    m = re.search(r'data-render-ms="(\d+)"', dom)
    assert m is not None
    shot = tmp_path / "shot.png"
    _chromium([f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri()],
              tmp_path / "p2")
    img = mpimg.imread(str(shot))[..., :3]
    ink = (img.mean(axis=2) < 0.9).mean()  # share of pixels that are not (near) white
    assert ink > 0.03 and img.std() > 0.05, (ink, img.std())


@needs_chromium
def test_compare_page_renders_both_runs(runs, tmp_path):
    page = build_view([runs / "a", runs / "b"], page_size=50).path
    dom = _chromium(["--dump-dom", page.as_uri()], tmp_path / "p").stdout
    body = dom[dom.index('<main id="list">'):dom.index("</main>")]
    shared = {s.id for s in read_samples(runs / "b")}
    for qid in shared:
        assert f'<span class="qid">{qid}</span>' in body
    assert body.count('<span class="tag">A</span>') == body.count('<span class="tag">B</span>')
    assert body.count('<span class="tag">A</span>') == len(shared)


# -- the command ------------------------------------------------------------------------------
@pytest.fixture
def _cli(run_cli):
    """`ensemble ...` in this process (the run_cli fixture of tests/conftest.py)."""

    def run(args, **kw):
        return run_cli(*args, **kw)

    return run


def test_cli_prints_the_path_and_json(runs, _cli):
    r = _cli(["view", str(runs / "a")])
    assert r.returncode == 0 and r.stdout.strip() == str(runs / "a" / "view.html")
    r = _cli(["view", str(runs / "a"), str(runs / "b"), "--json", "--out",
              str(runs / "cmp.html")])
    doc = json.loads(r.stdout)
    assert doc["path"] == str(runs / "cmp.html") and doc["bytes"] == (runs / "cmp.html").stat(
    ).st_size


def test_cli_open_hands_the_page_to_the_browser(runs, tmp_path):
    # a real process: webbrowser reads $BROWSER once per process
    got = tmp_path / "opened.txt"
    # webbrowser runs $BROWSER with %s replaced by the URL
    cmd = f"{sys.executable} -c \"import sys; open({str(got)!r}, 'w').write(sys.argv[1])\" %s"
    r = subprocess.run([sys.executable, "-m", "ensemble", "view", str(runs / "a"), "--open"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "BROWSER": cmd})
    assert r.returncode == 0, r.stderr
    assert got.read_text() == (runs / "a" / "view.html").resolve().as_uri()


@pytest.mark.parametrize("setup,needle", [
    (lambda p: None, "is not a folder"),
    (lambda p: p.mkdir(), "is not a run folder"),
    (lambda p: (p.mkdir(), (p / "summary.json").write_text("{}")),
     "rerun the same `ensemble eval`"),
    (lambda p: (p.mkdir(), (p / "calibration.json").write_text("{}")),
     "rerun the same `ensemble calibrate`"),
])
def test_bad_input_is_one_line(tmp_path, setup, needle, _cli):
    p = tmp_path / "run"
    setup(p)
    r = _cli(["view", str(p)])
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr


def test_no_shared_questions_is_one_line(runs, tmp_path, _cli):
    _hostile_run(tmp_path / "other", 1)
    r = _cli(["view", str(runs / "a"), str(tmp_path / "other")])
    assert r.returncode == 1 and "share no question" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def _shown(page: Path, frag: str, tmp: Path) -> set[str]:
    dom = _chromium(["--dump-dom", page.as_uri() + "#" + frag], tmp).stdout
    body = dom[dom.index('<main id="list">'):dom.index("</main>")]
    return {html.unescape(x) for x in re.findall(r'<span class="qid">([^<]*)</span>', body)}


@needs_chromium
def test_filters_and_search_in_the_browser(runs, tmp_path):
    """Each filter, set through the page's address, shows exactly the questions it names."""
    from ensemble.evals.records import read_votes

    page = build_view([runs / "a"], page_size=100).path
    samples = list(read_samples(runs / "a"))
    votes = list(read_votes(runs / "a"))
    assert _shown(page, "", tmp_path / "p0") == {s.id for s in samples}
    wrong = {v.id for v in votes if v.n == 3 and v.aggregator == "majority" and
             v.correct is False}
    assert 0 < len(wrong) < 6  # the filters must select something, not everything
    assert _shown(page, "wrong=1&n=3&agg=majority", tmp_path / "p1") == wrong
    invalid = {s.id for s in samples if s.answer is None}
    assert invalid and _shown(page, "invalid=1", tmp_path / "p2") == invalid
    answers: dict = {}
    for s in samples:
        if s.t == 1.0 and s.answer is not None:
            answers.setdefault(s.id, set()).add(s.answer)
    split = {i for i, a in answers.items() if len(a) > 1}
    assert 0 < len(split) < 6 and _shown(page, "split=1&t=1", tmp_path / "p3") == split
    assert _shown(page, "invalid=1&split=1&t=1", tmp_path / "p4") == split & {
        s.id for s in samples if s.answer is None and s.t == 1.0}
    said = {s.id for s in samples if s.text and "cannot decide" in s.text}
    assert said and _shown(page, "q=CANNOT%20decide", tmp_path / "p5") == said
    assert _shown(page, "q=no-such-text-anywhere", tmp_path / "p6") == set()


@needs_chromium
def test_compare_filter_finds_the_questions_decided_differently(runs, tmp_path):
    from ensemble.evals.records import read_votes

    page = build_view([runs / "a", runs / "b"], page_size=100).path

    def decisions(run):
        return {v.id: v.decision for v in read_votes(run)
                if v.t == 1.0 and v.n == 3 and v.aggregator == "majority"}

    da, db = decisions(runs / "a"), decisions(runs / "b")
    differ = {i for i in da.keys() & db.keys() if da[i] != db[i]}
    assert 0 < len(differ) < len(da) and _shown(page, "differ=1&n=3", tmp_path / "p") == differ


# -- a mixed ensemble (`ensemble eval --ensemble`) ---------------------------------------------
@pytest.fixture(scope="module")
def mixed(tmp_path_factory):

    base = tmp_path_factory.mktemp("mixed")
    with SimulatedServer(lam1=1.0, seed=1, invalid_rate=0.1) as a, \
            SimulatedServer(lam1=6.0, seed=2) as b:
        (base / "spec.json").write_text(json.dumps({"members": [
            {"model": "openai/sim-a", "api_base": a.base_url, "n": 2, "temperature": 1.0,
             "lam": 1.0, "label": "weak"},
            {"model": "openai/sim-b", "api_base": b.base_url, "n": 1, "temperature": 0.5,
             "lam": 12.0, "label": "strong"}]}))
        spec = load_spec(str(base / "spec.json")).model_copy(update={
            "task": "boxball", "samples": 3, "limit": 3, "bootstrap": 100})
        asyncio.run(run_eval(spec, RunOptions(out=str(base / "run"))))
    return base / "run"


def test_mixed_run_page_has_member_rows_and_the_ensembles_votes(mixed):
    data = _data(build_view([mixed]).path)
    run = data["runs"][0]
    # the rows the page draws: the ensemble (its pooled votes) first, then each member
    rows = [(r["label"], r["pooled"]) for r in data["rows"]]
    assert rows == [("ensemble", True), ("weak · t = 1", False), ("strong · t = 0.5", False)]
    samples = list(read_samples(mixed))
    got = Counter((data["questions"][c[0]][0], c[5], s[0], data["strings"][s[1]])
                  for c in data["cells"] for s in c[3])
    assert got == Counter((s.id, s.member, s.sample, s.text) for s in samples)
    ens = [c for c in data["cells"] if c[5] == "ensemble"]
    assert len(ens) == 6 and all(c[2] is None and not c[3] for c in ens)
    assert {run["aggs"][v[1]] for c in ens for v in c[4]} == {"majority", "lam-weighted",
                                                             "robust"}
    assert all(set(v[6]) == {"weak", "strong"} for c in ens for v in c[4])


@needs_chromium
def test_chromium_renders_a_mixed_run(mixed, tmp_path):
    from ensemble.evals.records import read_votes

    page = build_view([mixed], page_size=50).path
    dom = _chromium(["--dump-dom", page.as_uri()], tmp_path / "p").stdout
    assert 'data-render-ms="' in dom  # the page's code ran to the end
    head = dom[:dom.index('<main id="list">')]
    assert "<th>member</th>" in head and "ensemble robust − strong alone" in head
    body = dom[dom.index('<main id="list">'):dom.index("</main>")]
    labels = re.findall(r'<div class="tlabel">([^<]*)</div>', body)
    assert Counter(labels) == {"ensemble": 6, "weak · t = 1": 6, "strong · t = 0.5": 6}
    members = Counter(re.findall(r'<span class="member">([^<]*)</span>', body))
    assert set(members) == {"weak", "strong"}
    # the "wrong" filter on the ensemble's lam-weighted vote
    wrong = {v.id for v in read_votes(mixed) if v.aggregator == "lam-weighted"
             and v.correct is False}
    assert _shown(page, "wrong=1&agg=lam-weighted", tmp_path / "p1") == wrong


_MEASURE_GUTTER = """<script>
window.addEventListener("load", function () { setTimeout(function () {
  var worst = 0, count = 0;
  document.querySelectorAll(".idx").forEach(function (e) {
    var r = document.createRange(), tops = new Set();
    r.selectNodeContents(e);
    Array.from(r.getClientRects()).forEach(function (x) {
      if (x.width > 0) tops.add(Math.round(x.top));
    });
    worst = Math.max(worst, tops.size);
    count++;
  });
  document.body.setAttribute("data-idx-lines", worst);
  document.body.setAttribute("data-idx-count", count);
}, 300); });
</script></body>"""


@needs_chromium
def test_sample_index_gutter_does_not_wrap(runs, tmp_path):
    """Rendered in a narrow window, every sample-index gutter ("#0, 2–4") is one line."""
    page = build_view([runs / "a"], page_size=50, out=str(tmp_path / "v.html")).path
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _MEASURE_GUTTER, 1),
                     encoding="utf-8")
    dom = _chromium(["--window-size=700,2000", "--virtual-time-budget=5000", "--dump-dom",
                     probe.as_uri()], tmp_path / "p").stdout
    lines = re.search(r'data-idx-lines="(\d+)"', dom)
    count = re.search(r'data-idx-count="(\d+)"', dom)
    assert lines is not None and count is not None, dom[-500:]
    assert int(count.group(1)) > 0 and int(lines.group(1)) == 1


def test_cli_open_without_a_browser_says_how_to_open_the_page(runs, tmp_path, _cli):
    env = {k: v for k, v in os.environ.items()
           if k not in ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY")}
    empty = tmp_path / "bin"
    empty.mkdir()
    env["PATH"] = str(empty)  # no browser to find, graphical or console
    r = _cli(["view", str(runs / "a"), "--open"], env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(runs / "a" / "view.html")
    uri = (runs / "a" / "view.html").resolve().as_uri()
    assert "no web browser found" in r.stderr and uri in r.stderr


# -- issue 21: the two-run page's paired table, the calibration page's words, the plot's scale --
def test_two_run_page_has_the_paired_table_compare_computes(runs):
    from ensemble.evals.compare import compare_runs
    from ensemble.evals.rundir import read_run as compare_run

    page = build_view([runs / "a", runs / "b"]).path.read_text(encoding="utf-8")
    assert "Paired differences, B − A" in page
    doc = compare_runs(compare_run(runs / "a"), compare_run(runs / "b"))
    for r in doc["results"]:  # every cell, with the same difference and interval
        ci = r["utility_ci"]
        assert f"{r['utility_diff']:+.4f}" in page and f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" in page


def test_calibration_page_speaks_of_the_fit_not_of_votes(runs):
    page = build_view([runs / "cal"]).path.read_text(encoding="utf-8")
    help_text = re.search(r'<p class="help">(.*?)</p>', page, re.S).group(1)
    assert "posterior" in help_text and "vote" not in help_text
    assert "aggregator" not in help_text
    eval_page = build_view([runs / "a"]).path.read_text(encoding="utf-8")
    assert "aggregator" in re.search(r'<p class="help">(.*?)</p>', eval_page, re.S).group(1)


def test_box_ball_plot_is_scaled_to_its_intervals():
    # utilities of 0.38-0.46 (accuracy 0.69-0.73) on a −1..1 axis looked flat
    import matplotlib.pyplot as plt

    from ensemble.evals.outputs import accuracy_figure
    from ensemble.evals.schemas import ResultRow
    from ensemble.tasks import layout_of

    rows = [ResultRow(t=1.0, n=n, aggregator="majority", accuracy=(1 + u) / 2, sem=0.01,
                      ci=[0, 1], sem_questions=0.01, ci_questions=[0, 1], utility=u,
                      utility_sem=0.01, utility_ci=[u - 0.02, u + 0.02], items=216)
            for n, u in ((1, 0.38), (3, 0.42), (5, 0.46))]
    fig = accuracy_figure(rows, layout=layout_of("boxball"), title="boxball: m", chance=0.0)
    lo, hi = fig.axes[0].get_ylim()
    assert 0.3 <= lo < 0.36 and 0.48 < hi <= 0.55
    plt.close(fig)
