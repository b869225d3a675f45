"""`ensemble serve`: an OpenAI-compatible endpoint that answers each chat request with an
ensemble's vote (docs/serve.md).

    from ensemble.serve import VotingServer, parse_config
    config = parse_config({"models": {"vote": {"model": "openai/gpt-4o-mini", "n": 5}}})
    with VotingServer(config) as srv:
        ...  # any OpenAI client with base_url=srv.base_url and model="vote"
"""

from .app import VotingApp, upstream_failure
from .config import (
    SERVE_KEY_ENV,
    SERVE_MAX_CONCURRENCY,
    EndpointConfig,
    MemberConfig,
    ServeConfig,
    ServedModel,
    load_config,
    parse_config,
)
from .ensembles import Overrides, ServedEnsembles, build_ensemble, parse_overrides
from .logs import RequestLog, RequestRecord
from .server import VotingServer
from .wire import ChatRequest, RequestRejected, completion_doc, error_doc, parse_chat_request

__all__ = ["SERVE_KEY_ENV", "SERVE_MAX_CONCURRENCY", "ChatRequest", "EndpointConfig",
           "MemberConfig", "Overrides",
           "RequestLog", "RequestRecord", "RequestRejected", "ServeConfig", "ServedEnsembles",
           "ServedModel", "VotingApp", "VotingServer", "build_ensemble", "completion_doc",
           "error_doc", "load_config", "parse_chat_request", "parse_config", "parse_overrides",
           "upstream_failure"]
