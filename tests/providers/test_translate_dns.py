"""The one error translation (`ensemble.providers.translate`), for the failures a test cannot
provoke on loopback: a DNS failure is the resolver's own exception (socket.gaierror)."""

import socket

from ensemble.errors import EndpointUnreachable
from ensemble.providers.translate import translate_error


def test_a_dns_failure_names_the_host_or_the_default_endpoint():
    """Issue 32 item 10: without --api-base the host was named 'openai' (the provider)."""
    dns = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    err = translate_error(dns, model="openai/gpt-4o-mini")
    assert isinstance(err, EndpointUnreachable) and "'openai'" not in str(err)
    assert "default endpoint" in str(err) and "give --api-base" in str(err)
    err = translate_error(dns, model="openai/gpt-4o-mini",
                          api_base="https://llm.example.invalid/v1")
    assert "'llm.example.invalid'" in str(err) and "check --api-base" in str(err)
