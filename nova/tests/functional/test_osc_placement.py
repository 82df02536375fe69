"""The grouped tree as an operator sees it with osc-placement.

``openstack resource provider list`` (python-openstackclient with the
osc-placement plugin) against the real Placement a compute reported to.
"""

import json
import os
import subprocess
import sys

from nova.pci import placement_names
from nova.tests.functional.lib import base
from nova.tests.functional import test_pci_placement_tree as tree_tests

OPENSTACK = os.path.join(os.path.dirname(sys.executable), 'openstack')


class TestOscPlacementView(base.FunctionalTestCase):

    def osc(self, *args):
        env = dict(os.environ, OS_AUTH_TYPE='admin_token',
                   OS_ENDPOINT=self.placement.url, OS_TOKEN='admin',
                   OS_PLACEMENT_API_VERSION='1.39')
        result = subprocess.run([OPENSTACK, *args, '-f', 'json'], env=env,
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(0, result.returncode, result.stderr)
        return json.loads(result.stdout)

    def test_resource_provider_list_matches_the_design(self):
        self.enable_h200_groups()
        self.start_compute('cmp1')
        providers = self.osc('resource', 'provider', 'list')
        by_uuid = {p['uuid']: p for p in providers}
        parents = {p['name']: by_uuid[p['parent_provider_uuid']]['name']
                   if p['parent_provider_uuid'] else None
                   for p in providers}
        expected = tree_tests.h200_tree('cmp1')
        self.assertEqual({name: parent for name, (parent, _inv, _traits)
                          in expected.items()}, parents)
        gpu3 = [p for p in providers
                if p['name'] == tree_tests.dev('cmp1', 3)][0]
        traits = {t['name'] for t in self.osc(
            'resource', 'provider', 'trait', 'list', gpu3['uuid'])}
        # The design's traits and the host's shard traits (every provider
        # of the host has them).
        self.assertEqual(expected[gpu3['name']][2] |
                         placement_names.shard_traits('cmp1'), traits)
        inventory = self.osc('resource', 'provider', 'inventory', 'list',
                             gpu3['uuid'])
        self.assertEqual([('PGPU', 1)], [(i['resource_class'], i['total'])
                                         for i in inventory])
