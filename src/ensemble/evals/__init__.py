"""Eval runners: sample grids through the sampler, bootstrap, exact box-task utility, results."""
