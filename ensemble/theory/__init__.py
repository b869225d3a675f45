"""Decision-aggregation theory: structures, regret, robust aggregator, threshold g(n)."""
