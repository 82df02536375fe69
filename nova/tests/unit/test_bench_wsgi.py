"""Parts of tools/bench_wsgi.py without nova's services: the baseline
server, the load, the statistics and the table."""

import http.client

from nova import test
from nova.tests.unit import tool

bench = tool.load('bench_wsgi')


def _ok(environ, start_response):
    start_response('200 OK', [('Content-Type', 'text/plain')])
    return [environ['PATH_INFO'].encode()]


class TestBaseline(test.TestCase):

    def test_serves_one_request_per_connection(self):
        server = bench.BaselineServer(_ok, max_requests=4)
        server.start()
        self.addCleanup(server.stop)
        conn = http.client.HTTPConnection(server.url.split('//')[1],
                                          timeout=10)
        self.addCleanup(conn.close)
        conn.request('GET', '/x')
        resp = conn.getresponse()
        self.assertEqual((200, b'/x'), (resp.status, resp.read()))
        self.assertTrue(resp.will_close)

    def test_load_counts_answers_and_errors(self):
        server = bench.BaselineServer(_ok, max_requests=4)
        server.start()
        self.addCleanup(server.stop)
        result = bench.run_clients(server.url + '/y', 3, 0.3)
        self.assertGreater(result['rps'], 0)
        self.assertEqual(0, result['errors'])
        server.stop()
        self.assertGreater(bench.run_clients(server.url + '/y', 1, 0.1)
                           ['errors'], 0)


class TestOutput(test.TestCase):

    def test_summary_percentiles(self):
        result = bench.summarize([i / 1000 for i in range(1, 101)], 2, 2.0)
        self.assertEqual(50.0, result['rps'])
        self.assertAlmostEqual(50.5, result['p50_ms'])
        self.assertAlmostEqual(99.01, result['p99_ms'])
        self.assertEqual(2, result['errors'])

    def test_table(self):
        table = bench.format_table([{
            'endpoint': 'GET /servers/detail', 'clients': 100,
            'server': 'cheroot', 'rps': 120.4,
            'rounds_rps': [99.6, 120.4, 130.2], 'p50_ms': 8.04,
            'p99_ms': 30.0, 'errors': 0}])
        lines = table.splitlines()
        self.assertEqual(5, len(lines))
        self.assertEqual(['GET', '/servers/detail', '100', 'cheroot', '120',
                          '100-130', '8.0', '30.0', '0'], lines[3].split())

    def test_bad_clients_refused(self):
        self.assertRaises(SystemExit, bench.parse_args, ['--clients', 'a'])
        self.assertRaises(SystemExit, bench.parse_args, ['--clients', '0'])
        self.assertEqual([1, 10, 100], bench.parse_args([]).clients)


class TestRounds(test.TestCase):

    def test_median_round_is_a_measured_round(self):
        rounds = [{'rps': 30, 'p99_ms': 1}, {'rps': 10, 'p99_ms': 2},
                  {'rps': 20, 'p99_ms': 3}]
        self.assertEqual({'rps': 20, 'p99_ms': 3}, bench.median_round(rounds))
        self.assertEqual(10, bench.median_round(rounds[:2])['rps'])

    def test_servers_swap_who_goes_first(self):
        self.assertEqual(('baseline', 'cheroot'), bench.round_order(0))
        self.assertEqual(('cheroot', 'baseline'), bench.round_order(1))

    def test_ratios(self):
        rows = [{'endpoint': 'GET /x', 'clients': 10, 'server': 'baseline',
                 'rps': 40.0},
                {'endpoint': 'GET /x', 'clients': 10, 'server': 'cheroot',
                 'rps': 50.0}]
        self.assertEqual('GET /x, 10 clients: cheroot/baseline = 1.25',
                         bench.format_ratios(rows))

    def test_rounds_must_be_positive(self):
        self.assertRaises(SystemExit, bench.parse_args, ['--rounds', '0'])
