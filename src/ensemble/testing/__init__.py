"""Test your pipeline without a network: a planted expert behind a real HTTP server on
127.0.0.1, or in-process behind the provider seam, with the faults hosted providers show.

    from ensemble.testing import SimulatedServer
    with SimulatedServer(lam1=10.0, seed=0) as server:
        Ensemble("openai/sim-expert", api_base=server.base_url, ...).decide(prompt)

    from ensemble.testing import FakeExpertProvider          # no port at all
    Ensemble("sim-expert", provider=FakeExpertProvider(lam1=3.0), ...).decide(prompt)

`SimulatedExpert` is the planted expert both answer from (its docstring gives the answer
model); `FaultPlan` injects faults into the server; `BatchPlan` sets how its Batch API
(`/v1/files`, `/v1/batches`) behaves.
"""

from .batchapi import BatchPlan
from .expert import (
    BELIEF_MODES,
    CHAIN_KAPPA,
    LINKS,
    ChainBeliefs,
    MCModel,
    Reply,
    SimulatedExpert,
    answer_key_from_questions,
    prompt_hash,
    prompt_key,
    question_text,
)
from .fake import FakeExpertProvider
from .faults import FAULT_KINDS, FaultPlan
from .inprocess import InProcessTransport
from .openexpert import OpenAnswers, StructuredPlan, write_number
from .server import INDEX_HEADER, ServedReply, ServerStats, SimulatedServer
from .toolexpert import FormatPlan, ToolPlan

__all__ = ["BELIEF_MODES", "CHAIN_KAPPA", "FAULT_KINDS", "INDEX_HEADER", "LINKS", "BatchPlan",
           "ChainBeliefs", "FakeExpertProvider", "FaultPlan",
           "InProcessTransport",
           "FormatPlan", "MCModel", "OpenAnswers", "Reply", "ServedReply", "ServerStats",
           "SimulatedExpert", "SimulatedServer", "StructuredPlan", "ToolPlan",
           "answer_key_from_questions", "prompt_hash", "prompt_key", "question_text",
           "write_number"]
