"""Subcommands of the `ensemble` CLI, one module each, each with `register(subparsers)`.

Keep module-level imports light: argparse and the helpers in `_args` / `_output` only.
"""
