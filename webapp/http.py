"""Minimal WSGI request/response objects with Django QueryDict semantics for parameters."""

from __future__ import annotations

import json
from email.utils import formatdate
from http import HTTPStatus
from typing import Any, Iterable, Iterator, Optional
from urllib.parse import parse_qsl

MAX_BODY = 64 * 1024 * 1024
# a body is made whole before it is answered up to about this size (so it has a
# Content-Length); the rest of a larger one is made while it is sent
EAGER_BYTES = 4 << 20


class HttpError(Exception):
    """An error answered as plain text with ``status`` (400 for bad input)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class MultiDict:
    """Ordered multi-valued parameters: ``get`` gives the last value, ``getlist`` all."""

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        self._data: dict[str, list[str]] = {}
        for key, value in pairs:
            self._data.setdefault(key, []).append(value)

    def extend(self, other: MultiDict) -> None:
        for key, values in other._data.items():
            self._data.setdefault(key, []).extend(values)

    def get(self, key: str, default: Any = None) -> Any:
        values = self._data.get(key)
        return values[-1] if values else default

    def getlist(self, key: str) -> list[str]:
        return list(self._data.get(key, []))

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __getitem__(self, key: str) -> str:
        values = self._data.get(key)
        if not values:
            raise KeyError(key)
        return values[-1]

    def items(self) -> list[tuple[str, str]]:
        return [(k, v[-1]) for k, v in self._data.items() if v]

    def keys(self) -> list[str]:
        return list(self._data)

    def __bool__(self) -> bool:
        return bool(self._data)


def _recode(text: str) -> str:
    """WSGI strings are bytes decoded as latin-1; give them back as UTF-8 text."""
    try:
        return text.encode('latin-1').decode('utf-8')
    except (UnicodeDecodeError, UnicodeEncodeError):
        return text


class Request:
    """The parts of a WSGI request the views use."""

    def __init__(self, environ: dict[str, Any], script_prefix: str = '',
                 max_body: int = MAX_BODY) -> None:
        self.max_body = max_body
        self.environ = environ
        self.method = environ.get('REQUEST_METHOD', 'GET').upper()
        path = _recode(environ.get('PATH_INFO', '') or '/')
        if script_prefix and path.startswith(script_prefix):
            path = path[len(script_prefix):] or '/'
        self.path = path
        query = _recode(environ.get('QUERY_STRING', ''))
        self.GET = MultiDict(parse_qsl(query, keep_blank_values=True))
        self.POST = MultiDict()
        self.body = b''
        if self.method in ('POST', 'PUT'):
            self.body = self._read_body()
            ctype = environ.get('CONTENT_TYPE', '') or ''
            if ctype.startswith('application/x-www-form-urlencoded') or (
                    not ctype and self.body and b'=' in self.body):
                self.POST = MultiDict(parse_qsl(self.body.decode('utf-8', 'replace'),
                                                keep_blank_values=True))
        self.params = MultiDict()
        self.params.extend(self.GET)
        self.params.extend(self.POST)

    def _read_body(self) -> bytes:
        try:
            length = int(self.environ.get('CONTENT_LENGTH') or 0)
        except ValueError:
            raise HttpError('invalid Content-Length') from None
        if length > self.max_body:
            raise HttpError('request body too large (%d bytes, MAX_REQUEST_BYTES is %d)'
                            % (length, self.max_body), 413)
        if length <= 0:
            return b''
        stream = self.environ['wsgi.input']
        chunks = []
        remaining = length
        while remaining > 0:
            chunk = stream.read(min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b''.join(chunks)

    def header(self, name: str, default: Optional[str] = None) -> Optional[str]:
        key = 'HTTP_' + name.upper().replace('-', '_')
        if name.lower() == 'content-type':
            key = 'CONTENT_TYPE'
        return self.environ.get(key, default)


class Response:
    """A response: status, headers and body bytes (possibly as a few chunks), and for a
    large body made while it is sent, ``stream``: the chunks still to come (no
    Content-Length is known then; HTTP/1.1 servers send it chunked)."""

    def __init__(self, body: bytes | str | list[bytes] = b'',
                 content_type: str = 'text/html; charset=utf-8', status: int = 200,
                 headers: Optional[list[tuple[str, str]]] = None,
                 stream: Optional[Iterator[bytes]] = None) -> None:
        if isinstance(body, str):
            body = body.encode('utf-8')
        self.chunks: list[bytes] = body if isinstance(body, list) else [body]
        self.stream = stream
        self.status = status
        self.headers: list[tuple[str, str]] = [('Content-Type', content_type)]
        if headers:
            self.headers.extend(headers)

    def complete(self) -> None:
        """Make the rest of the stream now (the body is then whole, its length known)."""
        if self.stream is not None:
            self.chunks.extend(self.stream)
            self.stream = None

    @property
    def body(self) -> bytes:
        """The whole body (the chunks joined, the stream made to its end)."""
        self.complete()
        if len(self.chunks) != 1:
            self.chunks = [b''.join(self.chunks)]
        return self.chunks[0]

    @property
    def content_length(self) -> Optional[int]:
        """The body's length; None while part of it is still to be made."""
        if self.stream is not None:
            return None
        return sum(map(len, self.chunks))

    def __setitem__(self, name: str, value: str) -> None:
        self.headers = [(k, v) for k, v in self.headers if k.lower() != name.lower()]
        self.headers.append((name, value))

    def __getitem__(self, name: str) -> str:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        raise KeyError(name)

    def has_header(self, name: str) -> bool:
        return any(k.lower() == name.lower() for k, _ in self.headers)

    def status_line(self) -> str:
        try:
            return '%d %s' % (self.status, HTTPStatus(self.status).phrase)
        except ValueError:
            return '%d Unknown' % self.status


def streamed_response(chunks: Iterator[bytes], content_type: str) -> Response:
    """A response whose first EAGER_BYTES or so are made now (a body that ends there is
    a complete response with its Content-Length, and an error while it is made is
    answered as usual); the rest is made while it is sent."""
    first: list[bytes] = []
    size = 0
    for chunk in chunks:
        first.append(chunk)
        size += len(chunk)
        if size >= EAGER_BYTES:
            return Response(first, content_type, stream=chunks)
    return Response(first, content_type)


def text_response(message: str, status: int = 400) -> Response:
    return Response(message, 'text/plain; charset=utf-8', status)


def json_dumps(data: Any, pretty: bool = False, ensure_ascii: bool = True,
               sort_keys: bool = False, cls: Optional[type] = None) -> str:
    return json.dumps(data, indent=2 if pretty else None, ensure_ascii=ensure_ascii,
                      sort_keys=sort_keys, cls=cls)


def json_response_for(request: Request, data: Any, jsonp: Any = False,
                      status: int = 200) -> Response:
    """graphite-web's metrics JSON answer: ASCII only if the client accepts exactly JSON."""
    accept = request.header('Accept', 'application/json')
    ensure_ascii = accept == 'application/json'
    pretty = bool(request.params.get('pretty'))
    content = json_dumps(data, pretty=pretty, ensure_ascii=ensure_ascii)
    content_type = 'application/json'
    if jsonp:
        content = '%s(%s)' % (jsonp, content)
        content_type = 'text/javascript'
    if not ensure_ascii:
        content_type += ';charset=utf-8'
    return Response(content, content_type, status)


def add_never_cache_headers(response: Response) -> None:
    """Django's add_never_cache_headers."""
    if not response.has_header('Expires'):
        response['Expires'] = formatdate(usegmt=True)
    response['Cache-Control'] = 'max-age=0, no-cache, no-store, must-revalidate, private'


def patch_response_headers(response: Response, cache_timeout: int) -> None:
    """Django's patch_response_headers: Expires and Cache-Control max-age."""
    import time
    cache_timeout = max(0, int(cache_timeout))
    if not response.has_header('Expires'):
        response['Expires'] = formatdate(time.time() + cache_timeout, usegmt=True)
    response['Cache-Control'] = 'max-age=%d' % cache_timeout
