"""A simulated OpenAI-compatible expert server (real HTTP on 127.0.0.1) for tests and users.

    from ensemble.testing import SimulatedServer
    with SimulatedServer(lam1=10.0, seed=0) as server:
        Ensemble(model="openai/sim-expert", api_base=server.base_url, ...).decide(prompt)

See `ensemble.testing.server` for the planted expert's answer model and `FaultPlan` for faults.
"""

from .faults import FAULT_KINDS, FaultPlan
from .server import (
    INDEX_HEADER,
    MCModel,
    ServerStats,
    SimulatedServer,
    answer_key_from_questions,
    prompt_hash,
    prompt_key,
    question_text,
)

__all__ = ["FAULT_KINDS", "INDEX_HEADER", "FaultPlan", "MCModel", "ServerStats",
           "SimulatedServer", "answer_key_from_questions", "prompt_hash", "prompt_key", "question_text"]
