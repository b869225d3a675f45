"""The errors `ensemble` raises, all under one root.

    EnsembleError
    ├── InputError              bad user input: a value, an option, a file name (also a ValueError)
    │   └── DataError           a malformed data file: names the file, row and field
    ├── ProviderError           the model provider failed; carries model, provider, status, retry_after
    │   ├── AuthenticationError     401/403 or a missing API key (fail fast)
    │   ├── ModelNotFoundError      404 / unknown model (fail fast)
    │   ├── BadRequestError         400 / unsupported parameter (fail fast)
    │   ├── RateLimitError          429 (retried, honours retry_after)
    │   ├── ServerError             5xx (retried)
    │   ├── ProviderTimeoutError    a request timed out (retried)
    │   ├── ProviderConnectionError the connection dropped or was refused (retried)
    │   ├── MalformedResponseError  the reply could not be read (retried)
    │   └── RetryBudgetExceeded     attempts or total retry time used up
    ├── StoreError              the sample store cannot be opened or written
    └── LocalModelError         the embedded llama.cpp server cannot start or answer

Messages are one line, name the problem and, where there is one, the fix. They never
contain API keys: build them from `ProviderError` fields, never from raw request data.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "DataError",
    "EnsembleError",
    "InputError",
    "LocalModelError",
    "MalformedResponseError",
    "ModelNotFoundError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
    "RetryBudgetExceeded",
    "ServerError",
    "StoreError",
]


class EnsembleError(Exception):
    """Root of every error raised by `ensemble`."""


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

    retryable: bool = False

    def __init__(self, message: str, *, model: str | None = None, provider: str | None = None,
                 status: int | None = None, retry_after: float | None = None) -> None:
        self.model = model
        self.provider = provider
        self.status = status
        self.retry_after = retry_after
        super().__init__(message)


class AuthenticationError(ProviderError):
    """The provider refused the credentials, or no API key was found."""


class ModelNotFoundError(ProviderError):
    """The provider does not know this model."""


class BadRequestError(ProviderError):
    """The provider rejected the request (400), e.g. an unsupported parameter."""


class RateLimitError(ProviderError):
    """429: too many requests."""

    retryable = True


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
    """Retries stopped: the attempt or total-time budget is used up."""


class StoreError(EnsembleError):
    """The sample store cannot be opened, read or written."""


class LocalModelError(EnsembleError):
    """The embedded local model (llama.cpp server) cannot be started or reached."""
