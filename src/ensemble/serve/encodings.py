"""A request body's Content-Encoding, decoded by serve rather than by aiohttp.

aiohttp's own decoder refuses a coding it has no decoder for (br without Brotli, zstd without
its package) while it parses the headers, before any handler or middleware runs, and answers
with its plain-text 400, which OpenAI clients cannot parse. Serve therefore runs aiohttp with
`auto_decompress=False` (a documented `AppRunner` option) and decodes here, so that every
failure is answered in OpenAI's error shape by the route: an unknown coding is 415 (RFC 9110
15.5.16, with the codings serve reads in `Accept-Encoding`), a body that is not what its
coding says is 400, a body that inflates past the size limit is 413 (a small compressed body
cannot make serve hold more than the limit it sets on plain ones).

Codings are undone in the reverse of the order they were applied (the header lists them in
the order applied). gzip and deflate come with Python; br and zstd are read when their
decoders (`brotli` / `brotlicffi`, `zstandard`) are installed, as aiohttp does.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable
from typing import Any

__all__ = ["BodyTooLarge", "UndecodableBody", "UnsupportedEncoding", "decode_body",
           "supported_encodings"]


class UnsupportedEncoding(ValueError):
    """A Content-Encoding serve has no decoder for."""

    def __init__(self, coding: str) -> None:
        super().__init__(coding)
        self.coding = coding


class UndecodableBody(ValueError):
    """A body that is not valid in the coding its header names."""


class BodyTooLarge(ValueError):
    """A body that decodes to more than the limit."""


Decoder = Callable[[bytes, int], bytes]  # (data, at most this many bytes + 1) -> decoded


def _zlib(data: bytes, limit: int, wbits: int) -> bytes:
    d = zlib.decompressobj(wbits)
    out = d.decompress(data, limit + 1)
    if len(out) > limit:
        raise BodyTooLarge(limit)
    if not d.eof:
        raise UndecodableBody("the compressed data ends early")
    if d.unused_data.strip(b"\x00"):  # gzip allows several members; serve reads one
        raise UndecodableBody("data follows the end of the compressed stream")
    return out


def _gzip(data: bytes, limit: int) -> bytes:
    return _zlib(data, limit, 16 + zlib.MAX_WBITS)


def _deflate(data: bytes, limit: int) -> bytes:
    """RFC 9110's deflate is the zlib format; some clients send raw deflate for it."""
    try:
        return _zlib(data, limit, zlib.MAX_WBITS)
    except zlib.error:
        return _zlib(data, limit, -zlib.MAX_WBITS)


def _optional_decoders() -> dict[str, Decoder]:
    found: dict[str, Decoder] = {}
    brotli: Any = None
    for name in ("brotli", "brotlicffi"):
        try:
            brotli = __import__(name)
            break
        except ImportError:
            continue
    if brotli is not None:
        def _br(data: bytes, limit: int) -> bytes:
            try:
                out = bytes(brotli.decompress(data))
            except Exception as exc:  # noqa: BLE001 - each binding raises its own error class
                raise UndecodableBody(f"not valid brotli data ({type(exc).__name__})") from None
            if len(out) > limit:
                raise BodyTooLarge(limit)
            return out
        found["br"] = _br
    try:
        import zstandard
    except ImportError:
        pass
    else:
        def _zstd(data: bytes, limit: int) -> bytes:
            try:
                with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as r:
                    out = r.read(limit + 1)
            except zstandard.ZstdError as exc:
                raise UndecodableBody(f"not valid zstd data ({exc})") from None
            if len(out) > limit:
                raise BodyTooLarge(limit)
            return bytes(out)
        found["zstd"] = _zstd
    return found


DECODERS: dict[str, Decoder] = {"gzip": _gzip, "x-gzip": _gzip, "deflate": _deflate,
                                **_optional_decoders()}


def supported_encodings() -> str:
    """The codings serve reads, as an `Accept-Encoding` value."""
    return ", ".join(["identity", *(c for c in DECODERS if c != "x-gzip")])


def decode_body(raw: bytes, header: str | None, limit: int) -> bytes:
    """`raw` with the codings of its Content-Encoding `header` undone; at most `limit` bytes.
    Raises UnsupportedEncoding (before decoding anything), UndecodableBody or BodyTooLarge."""
    if not header:
        return raw
    codings = [c.strip().lower() for c in header.split(",") if c.strip()]
    for coding in codings:
        if coding != "identity" and coding not in DECODERS:
            raise UnsupportedEncoding(coding)
    body = raw
    for coding in reversed(codings):
        if coding == "identity":
            continue
        try:
            body = DECODERS[coding](body, limit)
        except zlib.error as exc:
            raise UndecodableBody(f"not valid {coding} data ({exc})") from None
    return body
