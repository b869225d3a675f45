"""The sampling engine: provider client (litellm), async sampler, retries, store, parsing."""
