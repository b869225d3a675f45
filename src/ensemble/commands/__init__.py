"""The core's subcommands of the `ensemble` CLI, one module each, each with `register(subparsers)`.

Other packages add theirs through the entry-point group "ensemble.commands" (see `ensemble.cli`).
Keep module-level imports light: argparse and `ensemble.cliargs` only.
"""
