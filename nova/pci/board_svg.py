"""The board as a picture: SVG of one host, HTML of the fleet.

Draws what ``nova.pci.board`` computes: each host's groups as nested boxes
(a board holding quads holding pairs), each device a cell coloured by its
state (free, used, unhealthy, withheld) with its address and the name of
the server holding it, and under it the free partitions per size. The
SVG is written by hand with ``xml.etree.ElementTree``, which escapes
every name and attribute; the HTML page holds each host's SVG inline, the
fleet's free partitions per size and a table of the servers holding
devices. ``nova-manage pci board --format svg|html`` prints them, the
nova-all demo writes the fleet page next to its log.
"""

import dataclasses
import xml.etree.ElementTree as ET

from nova.pci import board
from nova.pci import device as pci_device

SVG_NS = 'http://www.w3.org/2000/svg'

# Fill of a device cell by state, and the legend's words for it.
COLOURS = {board.FREE: '#43a047', board.USED: '#1e88e5',
           board.UNHEALTHY: '#e53935', board.WITHHELD: '#9e9e9e'}
LEGEND = {board.FREE: 'free', board.USED: 'used by a server',
          board.UNHEALTHY: 'unhealthy', board.WITHHELD: 'not offered'}

# Sizes in pixels: a device cell, the padding inside a group box, the
# height of a group's label, the gap between boxes.
CELL_W, CELL_H = 132, 52
PAD, LABEL_H, GAP = 8, 18, 6
# Longest server name drawn whole in a cell; the tooltip has all of it.
NAME_CHARS = 18
TITLE_H = 28
FOOTER_H = 24


@dataclasses.dataclass
class _Box:
    """A laid-out group: its size and its children's offsets."""

    group: board.Group
    width: int
    height: int
    children: list[tuple[int, '_Box']]
    cells: list[tuple[int, pci_device.TrackedDevice]]


def _layout(group: board.Group, labelled: bool) -> _Box:
    """Children left to right, then the group's own devices."""
    top = PAD + (LABEL_H if labelled else 0)
    x = PAD
    children, cells = [], []
    height = CELL_H
    for child in group.children.values():
        box = _layout(child, True)
        children.append((x, box))
        x += box.width + GAP
        height = max(height, box.height)
    for dev in group.devices:
        cells.append((x, dev))
        x += CELL_W + GAP
    return _Box(group, x - GAP + PAD, top + height + PAD, children, cells)


def _short(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[:NAME_CHARS - 1] + '…'


def _text(parent: ET.Element, x: float, y: float, content: str,
          **attrs: str) -> ET.Element:
    element = ET.SubElement(parent, 'text', x=str(x), y=str(y),
                            **{k.replace('_', '-'): v
                               for k, v in attrs.items()})
    element.text = content
    return element


def _draw_cell(parent: ET.Element, host_board: board.HostBoard,
               dev: pci_device.TrackedDevice, x: int, y: int) -> None:
    state = host_board.state(dev)
    holder = host_board.holder(dev)
    cell = ET.SubElement(parent, 'g', {'class': 'device %s' % state})
    tip = ET.SubElement(cell, 'title')
    tip.text = '%s: %s%s' % (dev.address, holder, ' (%s)' % dev.withheld
                             if dev.withheld else '')
    ET.SubElement(cell, 'rect', x=str(x), y=str(y), width=str(CELL_W),
                  height=str(CELL_H), rx='4', fill=COLOURS[state],
                  stroke='#263238')
    _text(cell, x + 6, y + 18, dev.address, font_size='12',
          fill='#ffffff', font_family='monospace')
    _text(cell, x + 6, y + 38, _short(holder), font_size='13',
          fill='#ffffff', font_weight='bold', font_family='sans-serif')


def _draw_box(parent: ET.Element, host_board: board.HostBoard, box: _Box,
              x: int, y: int, labelled: bool) -> None:
    if labelled:
        ET.SubElement(parent, 'rect', {
            'x': str(x), 'y': str(y), 'width': str(box.width),
            'height': str(box.height), 'rx': '6', 'fill': 'none',
            'stroke': '#607d8b', 'class': 'group'})
        _text(parent, x + PAD, y + PAD + 11, box.group.name,
              font_size='12', fill='#37474f', font_family='sans-serif')
    top = y + PAD + (LABEL_H if labelled else 0)
    for offset, child in box.children:
        _draw_box(parent, host_board, child, x + offset, top, True)
    for offset, dev in box.cells:
        _draw_cell(parent, host_board, dev, x + offset, top)


def _partitions_line(host_board: board.HostBoard) -> str:
    free = host_board.free_partitions()
    return 'Free partitions by size: ' + ', '.join(
        'size %d: %d' % item for item in sorted(free.items()))


def host_svg(host_board: board.HostBoard) -> ET.Element:
    """The ``<svg>`` element of one host's board."""
    box = _layout(host_board.tree(), False)
    width = max(box.width, 420)
    height = TITLE_H + box.height + FOOTER_H
    svg = ET.Element('svg', {
        'xmlns': SVG_NS, 'width': str(width), 'height': str(height),
        'viewBox': '0 0 %d %d' % (width, height), 'class': 'board'})
    ET.SubElement(svg, 'rect', width=str(width), height=str(height),
                  fill='#fafafa')
    used = sum(1 for d in host_board.devices
               if host_board.state(d) == board.USED)
    _text(svg, PAD, 19, '%s: %d devices, %d used' % (
        host_board.host, len(host_board.devices), used), font_size='15',
        font_weight='bold', font_family='sans-serif', fill='#212121')
    _draw_box(svg, host_board, box, 0, TITLE_H, False)
    _text(svg, PAD, TITLE_H + box.height + 16, _partitions_line(host_board),
          font_size='13', font_family='sans-serif', fill='#212121')
    return svg


def to_svg(host_board: board.HostBoard) -> str:
    """One host's board as an SVG document."""
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(
        host_svg(host_board), encoding='unicode')


def _legend(parent: ET.Element) -> None:
    legend = ET.SubElement(parent, 'p', {'class': 'legend'})
    for state, words in LEGEND.items():
        swatch = ET.SubElement(legend, 'span', style=(
            'display:inline-block;width:14px;height:14px;margin:0 4px 0 '
            '12px;vertical-align:middle;background:%s' % COLOURS[state]))
        swatch.tail = words


def _table(parent: ET.Element, head: tuple[str, ...],
           rows: list[tuple[str, ...]]) -> None:
    table = ET.SubElement(parent, 'table')
    row = ET.SubElement(table, 'tr')
    for title in head:
        ET.SubElement(row, 'th').text = title
    for values in rows:
        row = ET.SubElement(table, 'tr')
        for value in values:
            ET.SubElement(row, 'td').text = value


def fleet_html(boards: list[board.HostBoard]) -> str:
    """Every host's board on one HTML page, with the fleet's free
    partitions per size and the servers holding devices."""
    html = ET.Element('html', lang='en')
    head = ET.SubElement(html, 'head')
    ET.SubElement(head, 'meta', charset='utf-8')
    ET.SubElement(head, 'title').text = 'PCI device boards'
    ET.SubElement(head, 'style').text = (
        'body{font-family:sans-serif;margin:16px;background:#fff}'
        'table{border-collapse:collapse;margin:8px 0 16px}'
        'td,th{border:1px solid #b0bec5;padding:3px 8px;text-align:left}'
        'svg.board{display:block;margin:8px 0 20px}')
    body = ET.SubElement(html, 'body')
    ET.SubElement(body, 'h1').text = 'PCI device boards'
    _legend(body)
    per_host = {b.host: b.free_partitions() for b in boards}
    sizes = sorted({size for counts in per_host.values() for size in counts})
    ET.SubElement(body, 'h2').text = 'Free partitions by size'
    _table(body, ('size', 'free', 'hosts'), [
        (str(size), str(sum(c.get(size, 0) for c in per_host.values())),
         ', '.join('%s %d' % (host, counts[size])
                   for host, counts in sorted(per_host.items())
                   if counts.get(size)) or '-')
        for size in sizes])
    ET.SubElement(body, 'h2').text = 'Hosts'
    for host_board in boards:
        section = ET.SubElement(body, 'section', id='host-%s' %
                                host_board.host)
        section.append(host_svg(host_board))
    ET.SubElement(body, 'h2').text = 'Servers holding devices'
    _table(body, ('server', 'host', 'devices'), sorted(
        (name, host_board.host, ' '.join(addresses))
        for host_board in boards
        for name, addresses in host_board.holders().items()))
    return '<!DOCTYPE html>\n' + ET.tostring(html, encoding='unicode',
                                             method='html')
