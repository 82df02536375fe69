"""The board picture (nova.fleet.board_svg) of hand-made boards."""

import xml.etree.ElementTree as ET

from nova import test
from nova.fleet import board
from nova.fleet import board_svg
from nova.pci import device as pci_device
from nova.tests.unit.fleet.test_board import _dev
from nova.tests.unit.fleet.test_board import operator_marked
from nova.tests.unit.fleet.test_board import withheld_by

NS = {'s': board_svg.SVG_NS}


class BoardSvgTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.board = board.HostBoard('hgx-1', [
            _dev('0000:01:00.0', 'board/quad/pair-a', 'u1'),
            _dev('0000:02:00.0', 'board/quad/pair-a', 'u1'),
            _dev('0000:03:00.0', 'board/quad/pair-b'),
            _dev('0000:04:00.0', 'board/quad/pair-b'),
            _dev('0000:05:00.0', ''),
        ], {'u1': '<script>alert("x")</script> & a-very-long-server-name'})

    def test_nested_boxes_and_cells(self):
        svg = ET.fromstring(board_svg.to_svg(self.board).split('\n', 1)[1])
        groups = [t.text for t in svg.iterfind('.//s:text', NS)]
        for name in ('board', 'quad', 'pair-a', 'pair-b', board.UNGROUPED):
            self.assertIn(name, groups)
        boxes = {r.get('class') for r in svg.iterfind('.//s:rect', NS)}
        self.assertIn('group', boxes)
        cells = [g.get('class') for g in svg.iterfind('.//s:g', NS)]
        self.assertEqual(['device used'] * 2 + ['device free'] * 3, cells)
        # A cell lies inside the box of its pair, which lies inside its
        # quad's: x grows inward.
        rects = [r for r in svg.iterfind('.//s:rect', NS)
                 if r.get('class') == 'group']
        self.assertLess(float(rects[0].get('x')), float(rects[1].get('x')))
        self.assertGreater(float(rects[0].get('width')),
                           float(rects[1].get('width')))

    def test_names_escaped_and_shortened_with_full_tooltip(self):
        text = board_svg.to_svg(self.board)
        self.assertNotIn('<script>', text)
        svg = ET.fromstring(text.split('\n', 1)[1])
        shown = [t.text for t in svg.iterfind('.//s:text', NS)]
        self.assertIn('<script>alert("x"…', shown)
        tips = [t.text for t in svg.iterfind('.//s:title', NS)]
        self.assertIn('0000:01:00.0: <script>alert("x")</script> & '
                      'a-very-long-server-name', tips)

    def test_fleet_page(self):
        empty = board.HostBoard('empty', [], {})
        page = board_svg.fleet_html([self.board, empty])
        self.assertTrue(page.startswith('<!DOCTYPE html>\n<html'))
        self.assertNotIn('<script>', page)
        self.assertEqual(2, page.count('<svg '))
        # The servers table names the holder with its devices.
        self.assertIn('<td>&lt;script&gt;alert("x")&lt;/script&gt; &amp; '
                      'a-very-long-server-name</td><td>hgx-1</td>'
                      '<td>0000:01:00.0 0000:02:00.0</td>', page)


class WithheldSvgTest(test.TestCase):
    """A GPU the operator marked and a foreign partition, on one host."""

    def setUp(self):
        super().setUp()
        devices = [_dev('0000:18:00.0', 'board/pair-1', 'u1'),
                   _dev('0000:2a:00.0', 'board/pair-1', 'u1'),
                   _dev('0000:3a:00.0', 'board/pair-2'),
                   _dev('0000:5d:00.0', 'board/pair-2'),
                   _dev('0000:9a:00.0', 'pair-3'),
                   _dev('0000:ab:00.0', 'pair-3')]
        devices[0] = operator_marked(devices[0])
        devices[2:4] = [withheld_by(d, pci_device.PARTITION_FOREIGN)
                        for d in devices[2:4]]
        self.svg = ET.fromstring(board_svg.to_svg(board.HostBoard(
            'hgx-1', devices, {'u1': 'vm-1'})).split('\n', 1)[1])

    def test_groups_marked_and_reasons_written(self):
        texts = [t.text for t in self.svg.iterfind('.//s:text', NS)]
        self.assertEqual('hgx-1: 6 devices, 1 used, 1 unhealthy, '
                         '2 withheld', texts[0])
        self.assertEqual([
            'withheld: device 0000:18:00.0 unhealthy (operator: '
            'uncorrectable ECC errors, RMA 1234) \u2014 not offered: '
            'board, pair-1',
            'withheld: foreign partition 3 active \u2014 not offered: '
            'board, pair-2'],
            [t.text for t in self.svg.iterfind('.//s:text', NS)
             if t.get('class') == 'withheld-reason'])
        boxes = {}
        for rect in self.svg.iterfind('.//s:rect', NS):
            if rect.get('class', '').startswith('group'):
                boxes[rect.get('class')] = boxes.get(rect.get('class'),
                                                     0) + 1
                if rect.get('class') == 'group withheld':
                    self.assertEqual(board_svg.NOT_OFFERED_DASH,
                                     rect.get('stroke-dasharray'))
        # board, pair-1 and pair-2 are not offered; pair-3 is.
        self.assertEqual({'group withheld': 3, 'group': 1}, boxes)
        self.assertIn('pair-1 \u00b7 not offered', texts)
        self.assertIn('pair-3', texts)

    def test_devices_marked(self):
        marks = {}
        for cell in self.svg.iterfind('.//s:g', NS):
            lines = [t.text for t in cell.iterfind('s:text', NS)]
            if cell.find('s:circle', NS) is not None:
                marks[lines[0]] = lines[1:]
        self.assertEqual({
            # Held by a server: its name, then why it is out.
            '0000:18:00.0': ['vm-1', '!', 'unhealthy'],
            '0000:3a:00.0': ['withheld', '!', 'foreign partition 3'],
            '0000:5d:00.0': ['withheld', '!', 'foreign partition 3']},
            marks)
        tips = [t.text for t in self.svg.iterfind('.//s:g/s:title', NS)]
        self.assertIn('0000:3a:00.0: withheld; in Fabric Manager '
                      'partition 3 (...)', tips)
        self.assertIn('0000:18:00.0: vm-1; unhealthy since ? (operator): '
                      'uncorrectable ECC errors, RMA 1234', tips)
