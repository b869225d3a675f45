"""`ensemble view RUN [RUN_B]`: one self-contained HTML page to read a run's samples."""

from __future__ import annotations

import argparse
from typing import Any

from ensemble.cliargs import emit_json, positive_int


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "view", help="write RUN/view.html: every question and sample of a run (offline page)",
        description="Write one self-contained HTML page (no network: inline code, embedded "
                    "data) showing a run's table and plot, then every question with each "
                    "sample's reply, its parsed answer and the votes per n and aggregator; "
                    "filters for wrong decisions, invalid replies, split votes and a text "
                    "search. With two runs, shows them side by side on their shared questions "
                    "(same id and t). Works for `ensemble eval` and `ensemble calibrate` runs.")
    p.add_argument("run", help="a run folder (the --out of ensemble eval or calibrate)")
    p.add_argument("run_b", nargs="?", help="a second run folder to compare with")
    p.add_argument("--out", help="page path (default RUN/view.html, or "
                                 "RUN/compare-<RUN_B>.html for two runs)")
    p.add_argument("--page-size", type=positive_int, default=20,
                   help="questions per page (default 20)")
    p.add_argument("--open", action="store_true", help="open the page in the web browser")
    p.add_argument("--json", action="store_true",
                   help="print the page's path and size (questions, samples, bytes) as JSON")
    p.set_defaults(func=run, _parser=p)


def run(args: argparse.Namespace) -> int:
    from ensemble.evals.view import build_view

    runs = [args.run] + ([args.run_b] if args.run_b else [])
    res = build_view(runs, out=args.out, page_size=args.page_size)
    if args.open and not _open_in_browser(res.path):
        import sys

        uri = res.path.resolve().as_uri()
        print(f"ensemble: no web browser found to open the page; open {uri} in a browser (or "
              "copy the file to a machine with one: it works offline)", file=sys.stderr)
    if args.json:
        emit_json({"path": str(res.path), "questions": res.questions, "samples": res.samples,
                   "bytes": res.bytes})
    else:
        print(res.path)
    return 0


def _open_in_browser(path: Any) -> bool:
    """Open the page in the user's browser; False when Python finds none (a server, a
    container: webbrowser then has nothing to run)."""
    import webbrowser

    try:
        return bool(webbrowser.open(path.resolve().as_uri()))
    except webbrowser.Error:
        return False
