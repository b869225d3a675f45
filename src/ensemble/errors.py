"""The errors `ensemble` raises, all under one root.

    EnsembleError
    ├── InputError              bad user input: a value, an option, a file name (also a ValueError)
    │   └── DataError           a malformed data file: names the file, row and field
    ├── ProviderError           the model provider failed; carries model, provider, status,
    │   │                       retry_after, api_base, and whether it is retryable / systemic
    │   ├── AuthenticationError     401/403 or a missing API key (systemic: the run stops)
    │   ├── ModelNotFoundError      404 for the model, or an unknown model string (systemic)
    │   ├── EndpointNotFoundError   404 on the route: --api-base points at the wrong URL (systemic)
    │   ├── EndpointUnreachable     connection refused, DNS or TLS failure, invalid URL (systemic
    │   │                           once its attempts are used up)
    │   ├── BadRequestError         400/422: the request is wrong (fails at once)
    │   │   └── ContentRefusedError     the provider refuses this prompt for good (content policy)
    │   ├── RateLimitError          429: backpressure, retried until the time budget ends
    │   │   └── OverloadedError         503/529 "overloaded" with Retry-After: backpressure too
    │   ├── ServerError             5xx (retried, bounded attempts)
    │   ├── ProviderTimeoutError    a request timed out (retried, bounded attempts)
    │   ├── ProviderConnectionError the connection dropped mid-request (retried, bounded)
    │   ├── MalformedResponseError  the reply could not be read: not JSON, HTML, no choices
    │   └── RetryBudgetExceeded     attempts or the per-sample time budget used up
    ├── SamplingFailed          some prompts failed for good; the others finished and are stored
    │   └── RunStopped              a systemic failure stopped new requests (keys, endpoint, a run
    │                               of consecutive permanent failures, the cost cap)
    ├── BatchesSubmitted        not a failure: --detach submitted batches and returns (exit 0)
    ├── StoreError              the sample store cannot be opened or written
    └── LocalModelError         the embedded llama.cpp server cannot start or answer

Messages are one line, name the problem and, where there is one, the fix. They never contain
API keys: every message passes through `ensemble.secrets.redact` when the error is built.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "BatchesSubmitted",
    "ContentRefusedError",
    "DataError",
    "EndpointNotFoundError",
    "EndpointUnreachable",
    "EnsembleError",
    "InputError",
    "LocalModelError",
    "MalformedResponseError",
    "ModelNotFoundError",
    "OverloadedError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
    "RetryBudgetExceeded",
    "RunStopped",
    "SamplingFailed",
    "ServerError",
    "StoreError",
]


class EnsembleError(Exception):
    """Root of every error raised by `ensemble`. Its message is redacted of API keys."""

    def __init__(self, message: str = "", *args: object) -> None:
        from .secrets import redact

        super().__init__(redact(str(message)), *args)


class InputError(EnsembleError, ValueError):
    """A value given by the user is invalid. The message names the argument and the fix."""


class DataError(InputError):
    """A data file is missing or malformed."""

    def __init__(self, message: str, *, path: str | None = None, row: int | None = None,
                 field: str | None = None) -> None:
        self.path = path
        self.row = row
        self.field = field
        where = []
        if path is not None:
            where.append(str(path))
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


class ProviderError(EnsembleError):
    """A request to a model provider failed.

    Attributes carry what a user needs to act on it; none of them ever holds a secret.
    """

    retryable: bool = False  # worth another attempt (bounded by max_attempts)
    backpressure: bool = False  # the endpoint asks us to slow down: retried within the time budget
    systemic: bool = False  # every other request would fail the same way: stop the run
    attempts_cap: int | None = None  # at most this many attempts for this failure (None: the run's)

    def __init__(self, message: str, *, model: str | None = None, provider: str | None = None,
                 status: int | None = None, retry_after: float | None = None,
                 api_base: str | None = None, reason: str | None = None) -> None:
        self.model = model
        self.provider = provider
        self.status = status
        self.retry_after = retry_after
        self.api_base = api_base
        self.reason = reason or type(self).__name__  # a short label: "400 content policy"
        super().__init__(message)


class AuthenticationError(ProviderError):
    """The provider refused the credentials, or no API key was found."""

    systemic = True


class ModelNotFoundError(ProviderError):
    """The provider does not know this model."""

    systemic = True


class EndpointNotFoundError(ProviderError):
    """404 on the route itself (an HTML or plain page): the api_base is not an API's base URL."""

    systemic = True


class EndpointUnreachable(ProviderError):
    """Connection refused, DNS or TLS failure, or an invalid URL: nothing answers there.

    A remote host gets a bounded few attempts (a network blip); a refused loopback port, a TLS
    failure or an invalid URL none (`attempts_cap = 1`): another attempt would fail the same way.
    """

    retryable = True
    systemic = True
    attempts_cap = 3


class BadRequestError(ProviderError):
    """The provider rejected the request (400/422), e.g. an unsupported parameter."""


class ContentRefusedError(BadRequestError):
    """The provider refuses this prompt for good (content policy): it costs the question."""


class RateLimitError(ProviderError):
    """429: too many requests. Backpressure for the whole endpoint, not a failed attempt."""

    retryable = True
    backpressure = True


class OverloadedError(RateLimitError):
    """503/529 "overloaded" with Retry-After: backpressure like a 429."""


class ServerError(ProviderError):
    """5xx from the provider."""

    retryable = True


class ProviderTimeoutError(ProviderError):
    """The request timed out."""

    retryable = True


class ProviderConnectionError(ProviderError):
    """The connection was refused or dropped."""

    retryable = True


class MalformedResponseError(ProviderError):
    """The provider's reply could not be read."""

    retryable = True


class RetryBudgetExceeded(ProviderError):
    """Retries stopped: the attempt or per-sample time budget is used up."""


class SamplingFailed(EnsembleError):
    """Some requests failed for good. Every other sample was drawn and stored.

    `failures` lists them (`ensemble.sampling.SampleFailure`: request index, tag, status,
    reason); the message is one line summarising them.
    """

    def __init__(self, message: str, *, failures: Sequence[object] | None = None) -> None:
        self.failures = list(failures or [])
        super().__init__(message)


class RunStopped(SamplingFailed):
    """A systemic failure stopped new requests at once (credentials, endpoint, a run of
    consecutive permanent failures, or the cost cap). `cause` is the error that stopped it."""

    def __init__(self, message: str, *, failures: list[object] | None = None,
                 cause: BaseException | None = None) -> None:
        self.cause = cause
        super().__init__(message, failures=failures)


class StoreError(EnsembleError):
    """The sample store cannot be opened, read or written."""


class LocalModelError(EnsembleError):
    """The embedded local model (llama.cpp server) cannot be started or reached."""


class BatchesSubmitted(EnsembleError):
    """Not a failure: batch mode with `detach` submitted its batches (or found them still
    running) and returns without waiting. `batch_ids` names them; rerun to collect."""

    def __init__(self, message: str, *, batch_ids: list[str] | None = None) -> None:
        self.batch_ids = list(batch_ids or [])
        super().__init__(message)
