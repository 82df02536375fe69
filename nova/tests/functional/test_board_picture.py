"""The board as a picture: ``nova-manage pci board --format svg|html`` on
real computes, the HTML rendered in headless Chromium."""

import collections
import html
import os
import xml.etree.ElementTree as ET

import fixtures

from nova.cmd import manage
from nova import context as nova_context
from nova.db import api as db
from nova.pci import board_svg
from nova.tests.functional import base
from nova.tests.functional import picture
from nova.tests.functional import test_nova_manage

# The servers of the test, two with names a page must escape.
SERVERS = ('train <8> & co', 'pair "a"', 'solo-1')


class TestBoardPicture(base.FunctionalTestCase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()
        cmp1 = self.start_compute('cmp1')
        cmp2 = self.start_compute('cmp2')
        context = nova_context.get_admin_context()
        pair = base.pair_of(1)
        claims = ((cmp1, 'train <8> & co', range(1, 9)),
                  (cmp2, 'pair "a"', pair),
                  (cmp2, 'solo-1', (base.not_a_pair(1)[1],)))
        for compute, name, gpus in claims:
            instance = db.instance_create(context, {
                'display_name': name, 'project_id': 'p', 'user_id': 'u',
                'vm_state': 'active'})
            compute.rt.pci_tracker.claim(
                instance['uuid'], 'req-' + name,
                [base.GPUS[n - 1] for n in gpus])
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def _board(self, host=None, output_format='html'):
        return test_nova_manage._capture(
            lambda h: manage.pci_board(h, output_format), host)

    def test_svg_of_one_host(self):
        code, out, _ = self._board('cmp2', 'svg')
        self.assertEqual(0, code)
        svg = ET.fromstring(out.split('\n', 1)[1])
        ns = {'s': board_svg.SVG_NS}
        texts = [t.text for t in svg.iterfind('.//s:text', ns)]
        self.assertIn('pair "a"', texts)
        self.assertIn('solo-1', texts)
        self.assertNotIn('train <8> & co', texts)
        states = collections.Counter(
            g.get('class') for g in svg.iterfind('.//s:g', ns))
        self.assertEqual({'device used': 3, 'device free': 5}, states)
        self.assertIn('Free partitions by size: size 1: 5, size 2: 2, '
                      'size 4: 1, size 8: 0', texts)

    def test_svg_needs_one_host(self):
        code, _, err = self._board(None, 'svg')
        self.assertEqual(1, code)
        self.assertIn('name it with --host (hosts: cmp1, cmp2)', err)

    def test_html_rendered_in_chromium(self):
        missing = picture.chromium_missing()
        if missing:
            self.skipTest(missing)
        code, out, _ = self._board()
        self.assertEqual(0, code)
        self.assertIn('train &lt;8&gt; &amp; co', out)
        path = os.path.join(self.tmp, 'board.html')
        with open(path, 'w', encoding='utf-8') as f:
            f.write(out)

        width, height, pixels = picture.pixels(
            picture.screenshot(path, 1280, 1000))

        self.assertEqual((1280, 1000), (width, height))
        colours = collections.Counter(pixels)
        # Not blank: the cells of used and free devices are drawn, each
        # a sizeable area of its colour.
        used = tuple(bytes.fromhex(board_svg.COLOURS['used'][1:]))
        free = tuple(bytes.fromhex(board_svg.COLOURS['free'][1:]))
        self.assertGreater(colours[used], 10 * board_svg.CELL_W)
        self.assertGreater(colours[free], 10 * board_svg.CELL_W)
        self.assertLess(colours.most_common(1)[0][1], 0.95 * len(pixels))
        # Every server is named in the rendered page, in a device cell.
        rendered = picture.dom(path)
        for name in SERVERS:
            self.assertIn('>%s</text>' % html.escape(name, quote=False),
                          rendered)
