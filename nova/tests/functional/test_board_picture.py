"""The board as a picture: ``nova-manage pci board --format svg|html`` on
real computes, the HTML rendered in headless Chromium."""

import collections
import html
import os
import re
import xml.etree.ElementTree as ET

import fixtures

from nova.cmd import manage
from nova.conf import per_compute
from nova import context as nova_context
from nova.db import api as db
from nova.fleet import board
from nova.fleet import board_svg
from nova.tests.fixtures import fabric_manager as fake_fm
from nova.tests.functional.lib import base
from nova.tests.functional.lib import picture
from nova.tests.functional import test_boot_gpu_groups as boot
from nova.tests.functional import test_nova_manage
from nova.virt.fake import host as fakehost

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
                instance.uuid, 'req-' + name,
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


# README's fleet (tools/fake_hosts.py hgx-1=hgx-h200 hgx-2=hgx-h200
# nvl-1=h200-nvl); hgx-2 drives its Fabric Manager.
FLEET = {'hgx-1': 'hgx-h200', 'hgx-2': 'hgx-h200', 'nvl-1': 'h200-nvl'}
H200_BY_MODULE = {module: address for address, module in
                  fakehost.H200_MODULE_IDS.items()}
# Fabric Manager's partition of modules 2 and 4 (pair-a2), which someone
# else activates on hgx-2.
FOREIGN_PARTITION = 4
FOREIGN_GPUS = (H200_BY_MODULE[2], H200_BY_MODULE[4])
BROKEN_GPU = base.GPUS[0]
RMA = 'uncorrectable ECC errors, RMA 1234'
# The first screen of the page, as the issue measures it.
SCREEN = (1400, 1000)


class TestFleetPicture(boot.BootTestBase):
    """README's three hosts with servers booted through the API, a GPU
    the operator marked unhealthy and a Fabric Manager partition nova
    did not activate: the board shows what is withheld and why, in text
    and in the picture, with the servers on the first screen."""

    def setUp(self):
        super().setUp()
        self.flags('pci', alias=fakehost.h200_pci_config()['alias'])
        self.flags('filter_scheduler', pci_in_placement=True)
        hosts_dir = os.path.join(self.tmpdir, 'hosts')
        self.fm = self.useFixture(fake_fm.FabricManagerFixture(
            fakehost.H200_MODULE_IDS)).fm
        confs = {}
        for host, kind in FLEET.items():
            path = fakehost.write_compute_config(kind, host, hosts_dir)
            if host == 'hgx-2':
                # The operator's [libvirt] lines for a host with FM.
                with open(path, encoding='utf-8') as f:
                    text = f.read()
                with open(path, 'w', encoding='utf-8') as f:
                    f.write(text.replace('[libvirt]\n', (
                        '[libvirt]\nnvlink_partitions = fabric_manager\n'
                        'fmpm_path = %s\nnvidia_smi_path = %s\n' % (
                            self.fm.fmpm_path, self.fm.nvidia_smi_path)),
                        1))
            confs[host] = per_compute.layered(self.conf, path)
        self.start_allinone(FLEET, compute_confs=confs)
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def _withhold_and_boot(self):
        """The operator's mark on hgx-1, the foreign partition on hgx-2,
        then servers of 4, 2 and 1 GPUs."""
        code, _, err = test_nova_manage._capture(
            lambda host: manage.pci_device_set(self.conf, BROKEN_GPU, host,
                                               True, RMA, self.reportclient),
            'hgx-1')
        self.assertEqual(0, code, err)
        self.fm.call('activate', FOREIGN_PARTITION)
        self.computes['hgx-2'].repair_nvlink_partitions()
        for compute in self.computes.values():
            compute.update_available_resource()
        flavors = self.gpu_flavors()
        for size, name in ((4, 'quad <4> & co'), (2, 'pair "a"'),
                           (1, 'solo-1')):
            self.boot(flavors[size], name)

    def test_text_board_says_why_groups_are_not_offered(self):
        self._withhold_and_boot()
        code, out, _ = test_nova_manage._capture(
            lambda host: manage.pci_board(host, 'text'), None)
        self.assertEqual(0, code)
        unhealthy = ('NOT OFFERED: device %s unhealthy (operator: %s)' % (
            BROKEN_GPU, RMA))
        foreign = 'NOT OFFERED: foreign partition %d active' % (
            FOREIGN_PARTITION)
        hosts = out.split('\nhgx-2:')
        # The broken GPU's pair, quad and board on hgx-1; the foreign
        # partition's pair, its quad and the board on hgx-2.
        self.assertEqual(3, hosts[0].count(unhealthy), out)
        self.assertEqual(3, hosts[1].count(foreign), out)
        self.assertNotIn('foreign', hosts[0])

    def test_picture_marks_withheld_capacity_and_servers_on_screen(self):
        missing = picture.chromium_missing()
        if missing:
            self.skipTest(missing)
        self._withhold_and_boot()
        code, out, _ = test_nova_manage._capture(
            lambda host: manage.pci_board(host, 'html'), None)
        self.assertEqual(0, code)
        path = os.path.join(self.tmp, 'board.html')
        with open(path, 'w', encoding='utf-8') as f:
            f.write(out)

        rendered = picture.dom(path)
        # The reasons, written out under their hosts.
        for reason in ('withheld: device %s unhealthy (operator: %s)' % (
                BROKEN_GPU, RMA), 'withheld: foreign partition %d active'
                % FOREIGN_PARTITION):
            self.assertIn(html.escape(reason, quote=False), rendered)
        # Marks on the devices: the broken GPU and both GPUs of the
        # foreign partition carry a badge; their groups are dashed.
        ns = {'s': board_svg.SVG_NS}
        marked = {}
        withheld_groups = {}
        for svg in map(ET.fromstring, re.findall('<svg .*?</svg>', out)):
            host = svg.find('s:text', ns).text.split(':')[0]
            marked[host] = sorted(
                cell.find('s:text', ns).text
                for cell in svg.iterfind('.//s:g', ns)
                if cell.find('s:circle[@class="withheld-mark"]', ns)
                is not None)
            withheld_groups[host] = sorted(
                rect.get('stroke-dasharray') is not None
                for rect in svg.iterfind('.//s:rect[@class="group '
                                         'withheld"]', ns))
        self.assertEqual({'hgx-1': [BROKEN_GPU],
                          'hgx-2': sorted(FOREIGN_GPUS), 'nvl-1': []},
                         marked)
        self.assertEqual({'hgx-1': [True] * 3, 'hgx-2': [True] * 3,
                          'nvl-1': []}, withheld_groups)
        # Every server is named in the rendered page.
        for name in ('quad <4> & co', 'pair "a"', 'solo-1'):
            self.assertIn('>%s</text>' % html.escape(name, quote=False),
                          rendered)

        # The server table's first server is on the first screen.
        left, top, _, height = picture.bounding_box(
            path, '#servers tr:nth-child(2)', *SCREEN)
        self.assertLess(top + height, SCREEN[1])
        self.assertGreaterEqual(left, 0)
        width, height, pixels = picture.pixels(
            picture.screenshot(path, *SCREEN))
        self.assertEqual(SCREEN, (width, height))
        colours = collections.Counter(pixels)
        # The marks are drawn: the dashed borders of the groups the
        # broken GPU takes out and of those the foreign partition does.
        for state in (board.UNHEALTHY, board.WITHHELD):
            colour = tuple(bytes.fromhex(
                board_svg.NOT_OFFERED_STROKE[state][1:]))
            self.assertGreater(colours[colour], 2 * board_svg.CELL_W,
                               state)
