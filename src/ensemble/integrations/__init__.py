"""Ensemble voting inside other tools, without a server: `inspect_ai` (a model API registered
through inspect's entry-point group, `--model ensemble/<model>`)."""
