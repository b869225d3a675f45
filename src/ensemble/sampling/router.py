"""The Router provider lives in `ensemble.providers.router`; re-exported here, where the evals
and users import it."""

from ..providers.router import RouterProvider, as_provider, is_router, sampler_mode

__all__ = ["RouterProvider", "as_provider", "is_router", "sampler_mode"]
