"""The body limit (oslo.middleware's, answered in the caller's format)
of nova.body_limit, which nova-api and the embedded Placement share."""

import io

import webob

from nova import body_limit
from nova import test


def _echo(environ, start_response):
    """An app answering with the body it read."""
    body = webob.Request(environ).body
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [body]


def _refuse(status, message):
    return webob.Response(status=status, text='refused: %s' % message)


def _post(app, body: bytes, chunked: bool = False) -> webob.Response:
    req = webob.Request.blank('/', method='POST', body=body)
    if chunked:
        req.environ.update({'CONTENT_LENGTH': '', 'wsgi.input':
                            io.BytesIO(body), 'wsgi.input_terminated': True})
        del req.environ['webob.is_body_seekable']
    return req.get_response(app)


class BodyLimitTestCase(test.TestCase):

    def test_limits_of_two_apps_stay_their_own(self):
        # oslo.middleware reads its limit from a configuration: each app
        # has a private one, so nova-api's and Placement's never mix.
        small = body_limit.BodyLimit(_echo, 10, _refuse)
        large = body_limit.BodyLimit(_echo, 100, _refuse)
        body = b'x' * 50
        for _ in range(2):
            refused = _post(small, body)
            self.assertEqual(413, refused.status_int)
            self.assertEqual(
                'refused: The request body (50 bytes) is larger than the '
                'limit of 10 bytes ([api]max_request_body_size).',
                refused.text)
            self.assertEqual((200, body), (_post(large, body).status_int,
                                           _post(large, body).body))

    def test_body_at_the_limit_is_served(self):
        app = body_limit.BodyLimit(_echo, 10, _refuse)
        self.assertEqual(b'x' * 10, _post(app, b'x' * 10).body)
        self.assertEqual(b'x' * 10, _post(app, b'x' * 10, chunked=True).body)

    def test_chunked_body_over_the_limit_is_cut_off(self):
        # The app reads past the limit: oslo.middleware's error reaches
        # the limit, which answers it in the caller's format.
        app = body_limit.BodyLimit(_echo, 10, _refuse)
        refused = _post(app, b'x' * 11, chunked=True)
        self.assertEqual(413, refused.status_int)
        self.assertIn('(more than 10 bytes)', refused.text)

    def test_malformed_content_length_is_400(self):
        app = body_limit.BodyLimit(_echo, 10, _refuse)
        req = webob.Request.blank('/', method='POST', body=b'abc')
        req.environ['CONTENT_LENGTH'] = '3x'
        response = req.get_response(app)
        self.assertEqual(400, response.status_int)
        self.assertIn("'3x'", response.text)
