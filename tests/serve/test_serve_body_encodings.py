"""Every error serve answers is OpenAI's error object, including a body serve cannot decode
(defects3 item 5): aiohttp's own decoder answered an unsupported or broken Content-Encoding
with a plain-text 400 ("Can not decode content-encoding: ...") that clients parsed as garbage.
Serve now decodes the body itself (gzip, deflate; br and zstd when their decoders are
installed): a coding it cannot read is a 415 naming the ones it can, a broken body a 400, a
body that inflates past the 1 MiB limit a 413, each as JSON and one log line. Real requests
over loopback."""

from __future__ import annotations

import gzip
import importlib.util
import json
import socket
import zlib

import pytest

from ensemble.serve import RequestLog, VotingServer, parse_config
from ensemble.testing import SimulatedServer

CHAT = {"model": "box", "messages": [{"role": "user", "content": "Which box? L or R"}]}


@pytest.fixture(scope="module")
def env():
    lines: list[str] = []
    with SimulatedServer(seed=3) as up:
        cfg = parse_config({"port": 0, "models": {"box": {
            "model": "openai/sim-expert", "api_base": up.base_url, "n": 3,
            "choices": ["L", "R"]}}})
        with VotingServer(cfg, log=RequestLog(sink=lines.append)) as srv:
            yield srv, lines


def _send(srv, body: bytes, encoding: str | None) -> tuple[int, dict[str, str], bytes]:
    """`body` POSTed with `Content-Encoding: encoding` on a connection of its own; the status,
    headers and body of the reply (read until the server closes or the body is whole)."""
    port = int(srv.base_url.rsplit(":", 1)[1].split("/")[0])
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode())
    if encoding is not None:
        head += b"\r\nContent-Encoding: " + encoding.encode()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(head + b"\r\n\r\n" + body)
        s.settimeout(30)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    top, _, payload = got.partition(b"\r\n\r\n")
    status_line, *header_lines = top.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (h.partition(":") for h in header_lines)}
    return int(status_line.split()[1]), headers, payload


def _deflate_raw(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-15)
    return c.compress(data) + c.flush()


GOOD = json.dumps(CHAT).encode()
HAS_BR = any(importlib.util.find_spec(m) for m in ("brotli", "brotlicffi"))
HAS_ZSTD = importlib.util.find_spec("zstandard") is not None


@pytest.mark.parametrize("body, encoding, status, says", [
    # br and zstd are read when their decoders are installed: then garbage is a 400
    (b"not brotli", "br", *((400, "could not be read") if HAS_BR else
                            (415, "Content-Encoding 'br'"))),
    (b"not zstd", "zstd", *((400, "could not be read") if HAS_ZSTD else
                            (415, "Content-Encoding 'zstd'"))),
    (GOOD, "compress", 415, "Content-Encoding 'compress'"),
    (GOOD, "gzip, snappy", 415, "Content-Encoding 'snappy'"),
    (b"not gzip at all" * 100, "gzip", 400, "could not be read"),
    (b"\x1f\x8b\x08\x00" + b"x" * 1500, "gzip", 400, "could not be read"),
    (gzip.compress(GOOD, mtime=0)[:-12], "gzip", 400, "could not be read"),  # cut short
    (b"\x00not deflate\xff" * 20, "deflate", 400, "could not be read"),
    (gzip.compress(b" " * (3 << 20), mtime=0), "gzip", 413, "larger than 1048576 bytes"),
])
def test_a_body_serve_cannot_decode_is_an_openai_error(env, body, encoding, status, says):
    srv, lines = env
    before = len(lines)
    code, headers, payload = _send(srv, body, encoding)
    assert code == status
    assert headers["content-type"].startswith("application/json")
    doc = json.loads(payload)
    assert set(doc) == {"error"}
    assert set(doc["error"]) == {"message", "type", "param", "code"}
    assert doc["error"]["type"] == "invalid_request_error"
    assert says in doc["error"]["message"] and "\n" not in doc["error"]["message"]
    if status == 415:  # RFC 9110 15.5.16: say which codings would have been accepted
        assert "gzip" in headers["accept-encoding"] and "gzip" in doc["error"]["message"]
    new = lines[before:]
    assert len(new) == 1 and f" {status} " in new[0] and "Traceback" not in new[0]


@pytest.mark.parametrize("encoding, encode", [
    (None, lambda b: b),
    ("identity", lambda b: b),
    ("gzip", gzip.compress),
    ("GZIP", gzip.compress),
    ("x-gzip", gzip.compress),
    ("deflate", zlib.compress),  # RFC 9110: the zlib format
    ("deflate", _deflate_raw),  # what some clients send for it: raw deflate
    ("deflate, gzip", lambda b: gzip.compress(zlib.compress(b))),  # applied in order
])
def test_a_body_in_a_coding_serve_reads_is_decided(env, encoding, encode):
    srv, _ = env
    code, _, payload = _send(srv, encode(GOOD), encoding)
    assert code == 200, payload
    content = json.loads(payload)["choices"][0]["message"]["content"]
    assert "<answer>L</answer>" in content or "<answer>R</answer>" in content


@pytest.mark.skipif(not HAS_ZSTD, reason="zstandard is not installed (serve reads zstd with it)")
def test_a_zstd_body_is_decided_when_zstandard_is_installed(env):
    import zstandard

    srv, _ = env
    code, _, payload = _send(srv, zstandard.ZstdCompressor().compress(GOOD), "zstd")
    assert code == 200, payload
