"""Refuse hostile requests before the API reads them.

A request whose path or query string is not valid UTF-8 once
percent-decoded is a 400 (webob would raise while decoding it, a 500), and
a body larger than ``[api]max_request_body_size`` is a 413: refused
unread when ``Content-Length`` says so, and cut off once the limit is
passed when the body arrives without a length (chunked). The body limit
alone (:class:`BodyLimit`) also guards the Placement nova hosts.
"""

from collections.abc import Callable
import io
from urllib import parse

from nova.api import faults
from nova import exception


class LimitedInput(io.RawIOBase):
    """``wsgi.input`` that raises RequestBodyTooLarge past ``limit`` bytes
    (for bodies sent without a Content-Length)."""

    def __init__(self, stream, limit: int) -> None:
        super().__init__()
        self._stream = stream
        self._limit = limit
        self._read = 0

    def readable(self) -> bool:
        return True

    def _count(self, data: bytes) -> bytes:
        self._read += len(data)
        if self._read > self._limit:
            raise exception.RequestBodyTooLarge(
                size='more than %d' % self._limit, limit=self._limit)
        return data

    def read(self, size: int = -1) -> bytes:
        # Never ask for more than one byte past the limit.
        room = self._limit - self._read + 1
        size = room if size is None or size < 0 else min(size, room)
        return self._count(self._stream.read(size))

    def readline(self, size: int = -1) -> bytes:
        room = self._limit - self._read + 1
        size = room if size is None or size < 0 else min(size, room)
        return self._count(self._stream.readline(size))

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _undecodable(environ: dict) -> str | None:
    """Name of the first request part that is not UTF-8, or None."""
    for key, part in (('SCRIPT_NAME', 'path'), ('PATH_INFO', 'path')):
        try:
            # WSGI carries the percent-decoded bytes as latin-1 text.
            environ.get(key, '').encode('latin-1').decode('utf-8')
        except UnicodeError:
            return part
    try:
        parse.parse_qsl(environ.get('QUERY_STRING', ''),
                        keep_blank_values=True, errors='strict')
    except UnicodeError:
        return 'query string'
    return None


class BodyLimit:
    """WSGI middleware refusing a body over ``max_body_size`` bytes.

    ``refuse(status, message)`` makes the WSGI app answering the refusal,
    in the fault format of ``application`` (nova's by default).
    """

    def __init__(self, application, max_body_size: int,
                 refuse: Callable = faults.error_response) -> None:
        self.application = application
        self.max_body_size = max_body_size
        self.refuse = refuse

    def __call__(self, environ: dict, start_response):
        length = (environ.get('CONTENT_LENGTH') or '').strip()
        if length:
            if not length.isdecimal():
                return self.refuse(
                    400, 'Content-Length %r is not a non-negative '
                    'integer.' % length)(environ, start_response)
            if int(length) > self.max_body_size:
                exc = exception.RequestBodyTooLarge(
                    size=int(length), limit=self.max_body_size)
                return self.refuse(413, exc.message)(environ,
                                                     start_response)
        elif 'wsgi.input' in environ:
            environ['wsgi.input'] = LimitedInput(environ['wsgi.input'],
                                                 self.max_body_size)
        return self.application(environ, start_response)


class RequestGuard:
    """WSGI middleware applying the checks above to ``application``."""

    def __init__(self, application, max_body_size: int) -> None:
        self._limited = BodyLimit(application, max_body_size)

    def __call__(self, environ: dict, start_response):
        part = _undecodable(environ)
        if part is not None:
            return faults.error_response(
                400, 'The request %s is not valid UTF-8 after percent-'
                'decoding.' % part)(environ, start_response)
        return self._limited(environ, start_response)
