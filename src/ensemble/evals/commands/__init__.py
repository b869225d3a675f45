"""The commands the evals add to the `ensemble` CLI: eval, calibrate, compare and view.

Each module has `register(subparsers)` and is found by `ensemble.cli` through the entry-point
group "ensemble.commands" (pyproject.toml), so the core never imports the evals. Keep
module-level imports light: argparse and `ensemble.cliargs` only.
"""
