"""EmbeddedPlacement runs the real Placement app in-process.

Placement configures its database engine once per process, so each case
runs in a fresh interpreter.
"""

import json
import subprocess
import sys
import textwrap

import fixtures

from nova import test

_SCRIPT = textwrap.dedent('''
    import json, sqlite3, sys
    import requests
    from nova import embedded_placement
    from nova import exception

    state_path, name = sys.argv[1], sys.argv[2]
    placement = embedded_placement.EmbeddedPlacement(state_path=state_path)
    placement.start()
    headers = {"x-auth-token": "admin",
               "OpenStack-API-Version": "placement 1.39"}
    url = placement.url + "/resource_providers"
    if name:
        requests.post(url, json={"name": name}, headers=headers,
                      timeout=30).raise_for_status()
    names = [rp["name"] for rp in requests.get(
        url, headers=headers, timeout=30).json()["resource_providers"]]
    too_large = requests.post(url, data=b" " * (8 * 1024 * 1024),
                              headers=headers, timeout=60)
    other = embedded_placement.EmbeddedPlacement(
        connection="sqlite:///" + state_path + "/other.sqlite")
    try:
        other.start()
        second = "started"
    except exception.InvalidConfiguration as e:
        second = str(e)
    placement.stop()
    print(json.dumps({
        "names": names, "second": second,
        "too_large": [too_large.status_code,
                      too_large.json()["errors"][0]["detail"]],
        "wide": placement.conf.workarounds.optimize_for_wide_provider_trees,
        "strategy":
            placement.conf.placement.allocation_candidates_generation_strategy,
        "retries": placement.conf.placement.allocation_conflict_retry_count,
        "journal": sqlite3.connect(
            state_path + "/placement.sqlite").execute(
                "PRAGMA journal_mode").fetchone()[0],
    }))
''')


class EmbeddedPlacementTestCase(test.TestCase):

    def run_placement(self, state_path: str, name: str) -> dict:
        proc = subprocess.run(
            [sys.executable, '-c', _SCRIPT, state_path, name],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(0, proc.returncode, proc.stderr)
        return json.loads(proc.stdout.splitlines()[-1])

    def test_serves_and_persists_under_state_path(self):
        state_path = self.useFixture(fixtures.TempDir()).path + '/state'
        first = self.run_placement(state_path, 'cmp1')
        self.assertEqual(['cmp1'], first['names'])
        self.assertTrue(first['wide'])
        self.assertEqual('breadth-first', first['strategy'])
        # Claims are exclusive (see build_conf) and SQLite takes
        # concurrent writers (nova.db.sqlite).
        self.assertEqual(1, first['retries'])
        self.assertEqual('wal', first['journal'])
        self.assertIn('already runs a Placement database', first['second'])
        self.assertIn('other.sqlite', first['second'])
        # A body over the limit is refused unread, in Placement's format.
        self.assertEqual([413, 'The request body (8388608 bytes) is larger '
                          'than the limit of 114688 bytes '
                          '([api]max_request_body_size).'],
                         first['too_large'])

        # A new process on the same state_path sees the same database.
        second = self.run_placement(state_path, '')
        self.assertEqual(['cmp1'], second['names'])
