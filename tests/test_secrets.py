"""One redaction for every string that leaves the process, whatever the key's prefix."""


from ensemble.errors import ProviderError
from ensemble.providers.options import ProviderOptions
from ensemble.secrets import fingerprint, redact, redact_known, register


def test_registered_keys_of_any_shape_are_redacted_everywhere():
    key = "q7-PLAIN-key-without-prefix-42"
    register(key)
    text = f"error: Incorrect API key provided: {key}; retry with {key}."
    assert key not in redact(text) and redact(text).count("***") == 2
    assert key not in redact_known(text)
    # errors redact their own message, whoever builds it
    assert key not in str(ProviderError(f"provider said {key}"))


def test_key_shaped_tokens_are_redacted_in_messages_but_data_is_kept():
    msg = "Bearer abcdefgh12345678 and sk-proj-ABCDEFGHIJKLMNOP and ?api_key=zzzzzz99"
    out = redact(msg)
    assert "abcdefgh12345678" not in out and "ABCDEFGHIJKLMNOP" not in out
    assert "zzzzzz99" not in out and out.startswith("Bearer ***")
    # a model's reply that merely looks like a key is data: kept by redact_known
    reply = "The token sk-EXAMPLE-0000000000000 appears in the docs."
    assert redact_known(reply) == reply


def test_options_never_show_the_key():
    opts = ProviderOptions(api_base="http://127.0.0.1:1/v1", api_key="xx-never-show-me-1234")
    assert "never-show" not in repr(opts) and "never-show" not in str(opts.public())
    assert opts.public()["api_key"] == f"fingerprint:{fingerprint('xx-never-show-me-1234')}"


def test_cli_error_line_redacts_an_explicit_key(run_cli):
    key = "mykey-0123456789abcdef"
    r = run_cli("sample", "--model", "openai/x",
                        "--api-base", "http://127.0.0.1:9/v1", "--api-key", key,
                        "--max-attempts", "1", "hi")
    assert r.returncode == 1 and key not in r.stderr + r.stdout


def test_names_that_start_like_key_prefixes_are_not_redacted():
    for text in ("--out runs/api-comparison-gpt4o", "runs/key_rotation_experiment_2024",
                 "sk-learn-style-names-are-words"):
        assert redact(text) == text
    # real key material after the same prefixes still is
    assert redact("sk-abcdefghijklmnop1234") == "sk-***"
    assert redact("api-Zx81kLmN0pQrStUvWx") == "api-***"
