/* ensemble view: lists a run's questions and samples, one page at a time.
   Vanilla JS, no network. Model text enters the page only through textContent / text nodes. */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("data").textContent);
  var S = D.strings, R = D.runs, Q = D.questions, TWO = R.length === 2;
  var PAGE = D.page_size || 20;

  // ---- index: question -> Map(row -> [cell of run A, cell of run B]) ----
  // a run is rows x cells: D.rows lists the rows in order (each member of the run, a
  // temperature of one model or a named member, and the ensemble where there is one), each
  // with its label and its id in the address; a cell's c[6] is its row
  var ROWS = D.rows;
  var byQ = Q.map(function () { return new Map(); });
  D.cells.forEach(function (c) {
    var m = byQ[c[0]], row = m.get(c[6]);
    if (!row) { row = [null, null]; m.set(c[6], row); }
    row[c[1]] = c;
  });

  // the (n, aggregator) whose decision the "wrong" and "differ" filters use
  var NS = [], AGGS = [];
  R.forEach(function (r) {
    r.ns.forEach(function (n) { if (NS.indexOf(n) < 0) NS.push(n); });
    r.aggs.forEach(function (a) { if (AGGS.indexOf(a) < 0) AGGS.push(a); });
  });
  NS.sort(function (a, b) { return a - b; });
  // the n of the decision is a choice where a row has votes at several n of one rule (one
  // model's temperatures); a row voting at one n (a member at its own n, the ensemble at its
  // total, random-follow) decides at that n
  var CHOOSE_N = D.cells.some(function (c) {
    var seen = {};
    return c[4].some(function (v) {
      if (seen[v[1]] !== undefined && seen[v[1]] !== v[0]) return true;
      seen[v[1]] = v[0];
      return false;
    });
  });

  var st = { t: "all", n: NS.length ? NS[NS.length - 1] : 0, agg: AGGS[0] || "",
             wrong: false, invalid: false, split: false, differ: false, q: "",
             sort: "order", page: 0 };
  // the state in the address (view.html#wrong=1&n=3&sort=agree-asc): a view can be linked
  var FLAGS = ["wrong", "invalid", "split", "differ"];
  (function readHash() {
    var h = new URLSearchParams(location.hash.slice(1));
    FLAGS.forEach(function (k) { if (h.get(k) === "1") st[k] = true; });
    if (h.has("t")) st.t = h.get("t");
    if (h.has("n") && NS.indexOf(parseInt(h.get("n"), 10)) >= 0) st.n = parseInt(h.get("n"), 10);
    if (h.has("agg") && AGGS.indexOf(h.get("agg")) >= 0) st.agg = h.get("agg");
    if (h.has("sort")) st.sort = h.get("sort");
    if (h.has("q")) st.q = h.get("q").toLowerCase();
  })();
  var startPage = Math.max(0, (parseInt(new URLSearchParams(location.hash.slice(1)).get("page"),
                                        10) || 1) - 1);
  function writeHash() {
    var h = new URLSearchParams();
    FLAGS.forEach(function (k) { if (st[k]) h.set(k, "1"); });
    if (st.t !== "all") h.set("t", st.t);
    if (NS.length && st.n !== NS[NS.length - 1]) h.set("n", st.n);
    if (AGGS.length && st.agg !== AGGS[0]) h.set("agg", st.agg);
    if (st.sort !== "order") h.set("sort", st.sort);
    if (st.q) h.set("q", st.q);
    if (st.page) h.set("page", st.page + 1);
    try { history.replaceState(null, "", "#" + h.toString()); } catch (e) { /* file: quirks */ }
  }

  // ---- per-cell facts, computed once ----
  function facts(c) {
    if (c.f) return c.f;
    var counts = {}, valid = 0, inval = 0, top = 0, q = Q[c[0]], run = R[c[1]];
    c[3].forEach(function (s) {
      if (s[2] === null) { inval++; return; }
      valid++;
      counts[s[2]] = (counts[s[2]] || 0) + 1;
      if (counts[s[2]] > top) top = counts[s[2]];
    });
    var f = { counts: counts, valid: valid, invalid: inval, distinct: Object.keys(counts).length,
              agreement: valid ? top / valid : 0 };
    if (run.kind === "calibration") {
      var first = run.first, ones = counts[first] || 0;
      f.share = valid ? ones / valid : null;
      f.psi = psiFit(run, c[2], q[3]);
      f.resid = (f.share === null || f.psi === null) ? 0 : Math.abs(f.share - f.psi);
      // the vote of all the replies (a calibration takes none): wrong if it picks the less
      // likely box
      var keys = Object.keys(counts).sort(function (a, b) { return counts[b] - counts[a]; });
      var tie = keys.length > 1 && counts[keys[0]] === counts[keys[1]];
      f.decision = keys.length && !tie ? keys[0] : null;
      f.correct = q[2] === null || tie ? null : (f.decision === q[2] ? 1 : 0);
    }
    c.f = f;
    return f;
  }
  function psiFit(run, t, p) {
    if (p === null || p === undefined || !run.fits) return null;
    var fit = run.fits[fmtT(t)];
    if (!fit) return null;
    var lam = fit[0], b = fit[1] || 0;
    if (lam === "inf") return p > 0.5 ? 1 : (p < 0.5 ? 0 : 0.5);
    if (lam === "-inf") return p > 0.5 ? 0 : (p < 0.5 ? 1 : 0.5);
    if (lam === null) return null;
    return 1 / (1 + Math.exp(-(2 * lam * (2 * p - 1) + b)));
  }
  function vote(c) {  // [n, agg, decision, correct, tie, counts] at the selected (n, agg)
    if (!c) return null;
    var run = R[c[1]];
    if (run.kind === "calibration") {
      var f = facts(c);
      return [c[3].length, -1, f.decision, f.correct, 0, f.counts];
    }
    // the vote at the chosen n, or the row's one vote under this rule (its own n)
    var ai = run.aggs.indexOf(st.agg), only = null, count = 0;
    for (var i = 0; i < c[4].length; i++) {
      var v = c[4][i];
      if (v[1] !== ai) continue;
      if (v[0] === st.n) return v;
      only = v;
      count++;
    }
    return count === 1 ? only : null;
  }

  // ---- search: which strings contain the query (one pass over the distinct texts) ----
  var lower = null, hits = null;
  function searchSet(q) {
    if (!q) return null;
    if (!lower) lower = S.map(function (s) { return s.toLowerCase(); });
    var set = new Set();
    for (var i = 0; i < lower.length; i++) if (lower[i].indexOf(q) >= 0) set.add(i);
    return set;
  }

  // ---- filtering and sorting ----
  function rowsOf(qi) {
    var out = [];
    byQ[qi].forEach(function (row, k) {
      if (st.t === "all" || ROWS[k].id === st.t) out.push([k, row]);
    });
    out.sort(function (a, b) { return a[0] - b[0]; });
    return out;
  }
  function cellMatches(c) {
    if (!c) return false;
    var f = facts(c);
    if (st.invalid && f.invalid === 0) return false;
    if (st.split && f.distinct < 2) return false;
    if (st.wrong) { var v = vote(c); if (!v || v[3] !== 0) return false; }
    if (hits) {
      var found = c[3].some(function (s) { return hits.has(s[1]); });
      if (!found) return false;
    }
    return true;
  }
  function rowMatches(qi, row) {
    if (st.differ) {
      var a = vote(row[0]), b = vote(row[1]);
      if (!a || !b || a[2] === b[2]) return false;
    }
    if (hits) {
      var q = Q[qi];
      if (q[0].toLowerCase().indexOf(st.q) >= 0 || q[4].some(function (p) { return hits.has(p); })) {
        // the question itself matches: the other filters still apply to its samples
        var saved = hits; hits = null;
        var ok = row.some(cellMatches);
        hits = saved;
        return ok;
      }
    }
    return row.some(cellMatches);
  }
  function sortKey(qi) {
    var rows = rowsOf(qi), k = Infinity, r = 0;
    rows.forEach(function (tr) {
      tr[1].forEach(function (c) {
        if (!c) return;
        var f = facts(c);
        k = Math.min(k, f.agreement);
        r = Math.max(r, f.resid || 0);
      });
    });
    return st.sort === "resid" ? -r : k;
  }
  var view = [];
  function refilter() {
    hits = searchSet(st.q);
    var any = st.wrong || st.invalid || st.split || st.differ || hits;
    view = [];
    for (var qi = 0; qi < Q.length; qi++) {
      var rows = rowsOf(qi);
      if (!rows.length) continue;
      if (any && !rows.some(function (tr) { return rowMatches(qi, tr[1]); })) continue;
      view.push(qi);
    }
    if (st.sort !== "order") {
      var keys = new Map();
      view.forEach(function (qi) { keys.set(qi, sortKey(qi)); });
      var sign = st.sort === "agree-desc" ? -1 : 1;
      view.sort(function (a, b) { return sign * (keys.get(a) - keys.get(b)) || a - b; });
    }
    st.page = 0;
    render();
  }

  // ---- DOM helpers ----
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fmtT(t) { return String(Math.round(t * 1e9) / 1e9); }
  function pct(x) { return x === null || x === undefined ? "–" : x.toFixed(2); }
  function highlight(box, text, answer) {
    if (text === null || text === undefined) { box.append(el("span", "none", "(no text)")); return; }
    var start = -1, end = -1, re = /<answer>([\s\S]*?)<\/answer>/gi, m, last = null;
    while ((m = re.exec(text)) !== null) last = m;
    if (last) { start = last.index + 8; end = start + last[1].length; }
    else if (answer) {
      var i = text.toLowerCase().lastIndexOf(String(answer).toLowerCase());
      if (i >= 0) { start = i; end = i + String(answer).length; }
    }
    if (start < 0) { box.textContent = text; return; }
    box.append(document.createTextNode(text.slice(0, start)));
    box.append(el("mark", null, text.slice(start, end)));
    box.append(document.createTextNode(text.slice(end)));
  }
  function countsText(counts, inval) {
    var keys = Object.keys(counts).sort(function (a, b) { return counts[b] - counts[a]; });
    var parts = keys.map(function (k) { return k + " " + counts[k]; });
    if (inval) parts.push("invalid " + inval);
    return parts.join(" · ") || "no valid vote";
  }
  function mark(correct) {
    return correct === 1 ? ["ok", "✓ right"] : correct === 0 ? ["bad", "✗ wrong"] : ["inv", "–"];
  }

  // ---- rendering ----
  function renderCell(c, q) {
    var box = el("div", "cell");
    if (!c) { box.append(el("p", "none", "not in this run")); return box; }
    var run = R[c[1]], f = facts(c), head = el("div", "head");
    if (TWO) head.append(el("span", "tag", run.label), document.createTextNode(" "));
    if (run.kind === "calibration") {
      head.append(document.createTextNode(
        "share of “" + run.first + "”: " + (f.counts[run.first] || 0) + "/" + f.valid +
        " = " + pct(f.share) + " · fitted ψ(p) = " + pct(f.psi) +
        " · posterior p = " + (q[3] === null ? "–" : q[3].toFixed(3)) +
        (f.invalid ? " · invalid " + f.invalid : "")));
      box.append(head);
    } else {
      head.append(document.createTextNode(ROWS[c[6]].pooled
        ? "the ensemble's decision under each rule, from each member's first n votes " +
          "(their samples are in the members' rows)"
        : "answers: " + countsText(f.counts, f.invalid) + " · agreement " + pct(f.agreement)));
      box.append(head);
      var tb = el("table", "votes"), tr = el("tr");
      ["n", "aggregator", "votes of the first n", "decision", ""].forEach(function (h) {
        tr.append(el("th", null, h));
      });
      tb.append(tr);
      var chosen = vote(c);
      c[4].forEach(function (v) {
        var agg = run.aggs[v[1]], row = el("tr");
        if (v === chosen) row.className = "sel";
        var m = mark(v[3]);
        var byMember = v[6] ? Object.keys(v[6]).map(function (m) {
          return m + ": " + countsText(v[6][m], 0); }).join(" | ") : null;
        row.append(el("td", null, v[0]), el("td", null, agg),
                   el("td", null, byMember || countsText(v[5], 0)),
                   el("td", null, v[2] === null ? (v[4] ? "tie (open)" : "none") : v[2]),
                   el("td", m[0], m[1]));
        tb.append(row);
      });
      box.append(tb);
    }
    // identical replies (same text, same answer: greedy decoding repeats itself) are shown
    // once, with the indices of all the samples that gave them
    var groups = [], seen = new Map();
    c[3].forEach(function (s) {
      var key = s[1] + "\u0000" + s[2], g = seen.get(key);
      if (!g) { g = { s: s, idx: [], tokens: s[3] }; seen.set(key, g); groups.push(g); }
      g.idx.push(s[0]);
    });
    var ol = el("ol", "samples");
    groups.forEach(function (g) {
      var s = g.s, li = el("li"), cls = s[2] === null ? "inv" : q[2] === null ? "" :
        (s[2] === q[2] ? "ok" : "bad");
      var idx = el("span", "idx");
      indices(g.idx).forEach(function (part, k) {  // breaks only between entries
        if (k) idx.append(" ");
        idx.append(el("span", null, part));
      });
      if (c[5] !== null && c[5] !== undefined) {
        li.className = "m";
        ol.className = "samples m";
        li.append(el("span", "member", c[5]));
      }
      idx.title = "sample index" + (g.idx.length > 1 ? "es (" + g.idx.length + " identical replies)" : "");
      li.append(idx);
      li.append(el("span", "ans " + cls, (s[2] === null ? "invalid" : s[2]) +
                   (g.idx.length > 1 ? " ×" + g.idx.length : "")));
      var tx = el("div", "text" + (cls ? " a-" + cls : ""));
      tx.title = "click to expand" + (g.tokens !== null ? " · " + g.tokens + " tokens" : "");
      highlight(tx, s[1] < 0 ? null : S[s[1]], s[2]);
      tx.addEventListener("click", function () { tx.classList.toggle("open"); });
      li.append(tx);
      ol.append(li);
    });
    box.append(ol);
    return box;
  }
  function preview(prompt) {
    // the question (and its options) when the prompt marks them with "### Question:" and
    // "### Options:" (the paper's format): the first paragraph of each; else the prompt's start
    function para(name) {
      var m = new RegExp("###\\s*" + name + ":\\s*([\\s\\S]*?)(?:\\n\\s*\\n|###|$)").exec(prompt);
      return m ? m[1].trim() : "";
    }
    var text = [para("Question"), para("Options")].filter(Boolean).join("\n");
    if (!text) text = prompt.trim();
    return text.length > 600 ? text.slice(0, 600) + "…" : text;
  }
  function indices(list) {  // [0,1,2,5] -> ["#0–2,", "5"]: entries of "#0–2, 5"
    var out = [], i = 0;
    while (i < list.length) {
      var j = i;
      while (j + 1 < list.length && list[j + 1] === list[j] + 1) j++;
      out.push(j > i ? list[i] + "–" + list[j] : String(list[i]));
      i = j + 1;
    }
    return out.map(function (e, k) {
      return (k ? "" : "#") + e + (k < out.length - 1 ? "," : "");
    });
  }
  function renderQuestion(qi) {
    var q = Q[qi], art = el("article", "q"), h = el("header");
    art.id = "q-" + qi;
    h.append(el("span", "qid", q[0]));
    if (q[2] !== null) h.append(el("span", "truth", "truth: " + q[2]));
    if (q[3] !== null) h.append(el("span", null, "posterior P(" + (q[1][0] || "") + ") = " + q[3].toFixed(3)));
    if (q[5]) {
      // open answers: each canonical answer with the spellings that voted for it
      var sp = el("div", "spellings");
      q[1].forEach(function (a) {
        var w = q[5][a] || {};
        var parts = Object.keys(w).map(function (k) { return k + " ×" + w[k]; });
        sp.append(el("div", null, a + (parts.length ? " ← " + parts.join(", ") : "")));
      });
      h.append(el("span", null, "answers (as written):"), sp);
    } else {
      h.append(el("span", null, "choices: " + q[1].join(", ")));
    }
    var pv = preview(q[4][0] < 0 ? "" : S[q[4][0]]);
    if (pv) h.append(el("div", "preview", pv));
    var prompts = q[4].filter(function (p, i) { return i === 0 || p !== q[4][0]; });
    prompts.forEach(function (p, i) {
      var d = el("details", "prompt"), sm = el("summary", null,
        prompts.length > 1 ? "prompt of run " + R[i].label : "prompt");
      var pre = el("pre");
      pre.textContent = p < 0 ? "" : S[p];
      d.append(sm, pre);
      h.append(d);
    });
    art.append(h);
    rowsOf(qi).forEach(function (tr) {
      var row = el("div", "trow"), cols = el("div", "cols");
      row.append(el("div", "tlabel", ROWS[tr[0]].label));
      cols.append(renderCell(tr[1][0], q));
      if (TWO) cols.append(renderCell(tr[1][1], q));
      row.append(cols);
      art.append(row);
    });
    return art;
  }
  function renderPager(nav) {
    nav.textContent = "";
    var pages = Math.max(1, Math.ceil(view.length / PAGE));
    var prev = el("button", null, "◀ previous"), next = el("button", null, "next ▶");
    prev.type = next.type = "button";
    prev.disabled = st.page === 0;
    next.disabled = st.page >= pages - 1;
    prev.addEventListener("click", function () { go(st.page - 1); });
    next.addEventListener("click", function () { go(st.page + 1); });
    var label = el("label", null, "page ");
    var inp = el("input");
    inp.type = "number"; inp.min = 1; inp.max = pages; inp.value = st.page + 1; inp.style.width = "5em";
    inp.addEventListener("change", function () { go((parseInt(inp.value, 10) || 1) - 1); });
    label.append(inp, document.createTextNode(" of " + pages));
    nav.append(prev, label, next);
  }
  function go(p) {
    var pages = Math.max(1, Math.ceil(view.length / PAGE));
    st.page = Math.min(Math.max(0, p), pages - 1);
    render();
    document.getElementById("samples-head").scrollIntoView();
  }
  function render() {
    writeHash();
    var list = document.getElementById("list");
    list.textContent = "";
    var a = st.page * PAGE, b = Math.min(view.length, a + PAGE);
    var frag = document.createDocumentFragment();
    for (var i = a; i < b; i++) frag.append(renderQuestion(view[i]));
    if (!view.length) frag.append(el("p", "none", "No question matches these filters."));
    list.append(frag);
    document.getElementById("status").textContent =
      (view.length ? "questions " + (a + 1) + "–" + b + " of " + view.length : "0 questions") +
      (view.length !== Q.length ? " (filtered from " + Q.length + ")" : "") +
      (TWO ? " shared by both runs" : "") + " · " + ROWS.length +
      (ROWS.length === 1 ? " row: " : " rows: ") +
      ROWS.map(function (r) { return r.label; }).join(", ");
    renderPager(document.getElementById("pager-top"));
    renderPager(document.getElementById("pager-bottom"));
  }

  // ---- controls ----
  function control(label, input) {
    var l = el("label", null, label + " ");
    l.append(input);
    return l;
  }
  function select(options, value, onchange) {
    var s = el("select");
    options.forEach(function (o) {
      var opt = el("option", null, o[1]);
      opt.value = String(o[0]);
      if (String(o[0]) === String(value)) opt.selected = true;
      s.append(opt);
    });
    s.addEventListener("change", function () { onchange(s.value); refilter(); });
    return s;
  }
  function check(label, key, title) {
    var c = el("input");
    c.type = "checkbox";
    c.id = "f-" + key;
    c.checked = !!st[key];
    c.addEventListener("change", function () { st[key] = c.checked; refilter(); });
    var l = el("label");
    l.title = title;
    l.append(c, document.createTextNode(" " + label));
    return l;
  }
  function controls() {
    var f = document.getElementById("controls");
    var sort0 = st.sort;
    var anyEval = R.some(function (r) { return r.kind === "eval"; });
    var anyCal = R.some(function (r) { return r.kind === "calibration"; });
    f.append(control("row", select([["all", "all"]].concat(ROWS.map(function (r) {
      return [r.id, r.label]; })), st.t, function (v) { st.t = v; })));
    if (anyEval) {
      if (CHOOSE_N) f.append(control("decision of n =", select(NS.map(function (n) { return [n, n]; }),
        st.n, function (v) { st.n = parseInt(v, 10); })));
      f.append(control("by", select(AGGS.map(function (a) { return [a, a]; }), st.agg,
        function (v) { st.agg = v; })));
    }
    f.append(check("wrong decisions", "wrong", anyCal && !anyEval
      ? "most replies chose the less likely answer"
      : "the vote of the first n samples (the n and aggregator chosen) is wrong"));
    f.append(check("invalid replies", "invalid", "at least one reply has no valid answer"));
    f.append(check("split votes", "split", "the replies give at least two different answers"));
    if (TWO) f.append(check("A and B decide differently", "differ",
      "the two runs' votes (n and aggregator chosen) differ"));
    var q = el("input");
    q.type = "search";
    q.id = "search";
    q.placeholder = "search ids, prompts, replies";
    q.value = st.q;
    var timer = null;
    q.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { st.q = q.value.trim().toLowerCase(); refilter(); }, 200);
    });
    f.append(q);
    var sorts = [["order", "file order"], ["agree-asc", "agreement, lowest first"],
                 ["agree-desc", "agreement, highest first"]];
    if (anyCal) sorts.push(["resid", "farthest from the fitted ψ"]);
    f.append(control("sort", select(sorts, sort0, function (v) { st.sort = v; })));
  }

  controls();
  refilter();
  if (startPage) go(startPage);
  var ms = Math.round(performance.now());
  document.documentElement.setAttribute("data-render-ms", String(ms));
  document.getElementById("footer").textContent =
    "ensemble " + D.version + " · page written " + D.generated + " · " + Q.length +
    " questions, " + D.cells.reduce(function (n, c) { return n + c[3].length; }, 0) +
    " samples · first render " + ms + " ms after navigation";
})();
