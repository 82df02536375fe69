"""The board picture (nova.pci.board_svg) of hand-made boards."""

import xml.etree.ElementTree as ET

from nova import test
from nova.pci import board
from nova.pci import board_svg
from nova.tests.unit.pci.test_board import _dev

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
