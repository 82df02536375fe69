"""The board as a picture: SVG of one host, HTML of the fleet.

Draws what ``nova.fleet.board`` computes: each host's groups as nested boxes
(a board holding quads holding pairs), each device a cell coloured by its
state (free, used, unhealthy, withheld) with its address and the name of
the server holding it, and under it the free partitions per size. What
keeps capacity out of the offer is marked where it is: a device taken out
(unhealthy, or kept by a foreign or quarantined partition) gets a badge
and says why in a word, a group not offered gets a dashed border and
"not offered" in its label, and under the boxes each reason is written
out with the groups it takes out ("withheld: device 0000:18:00.0
unhealthy (operator: ...)", "withheld: foreign partition 3 active").
The SVG is written by hand with ``xml.etree.ElementTree``, which escapes
every name and attribute; the HTML page holds, above the hosts' SVGs so
that they are on its first screen, the fleet's free partitions per size
and a table of the servers holding devices. ``nova-manage pci board
--format svg|html`` prints them, the nova-all demo writes the fleet page
next to its log.
"""

import collections
import dataclasses
import xml.etree.ElementTree as ET

from nova.fleet import board
from nova.pci import device as pci_device

SVG_NS = 'http://www.w3.org/2000/svg'

# Fill of a device cell by state, and the legend's words for it.
COLOURS = {board.FREE: '#43a047', board.USED: '#1e88e5',
           board.UNHEALTHY: '#e53935', board.WITHHELD: '#9e9e9e'}
LEGEND = {board.FREE: 'free', board.USED: 'used by a server',
          board.UNHEALTHY: 'unhealthy', board.WITHHELD: 'not offered'}
# Border of a group box; of one not offered, by the state of its first
# reason (an unhealthy device is red, anything else dark grey).
GROUP_STROKE = '#607d8b'
NOT_OFFERED_STROKE = {board.UNHEALTHY: '#c62828', board.WITHHELD: '#424242'}
NOT_OFFERED_DASH = '7 4'

# Sizes in pixels: a device cell, the padding inside a group box, the
# height of a group's label, the gap between boxes.
CELL_W, CELL_H = 132, 64
PAD, LABEL_H, GAP = 8, 18, 6
# Longest server name drawn whole in a cell; the tooltip has all of it.
NAME_CHARS = 18
# Longest reason drawn whole under it (in a smaller, lighter font).
MARK_CHARS = 21
TITLE_H = 28
FOOTER_H = 24
# Height of a line saying why capacity is withheld, and the width a
# character of it takes at most (the picture is made wide enough).
REASON_H = 18
REASON_CHAR_W = 7


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


def _short(name: str, limit: int = NAME_CHARS) -> str:
    return name if len(name) <= limit else name[:limit - 1] + '…'


def _text(parent: ET.Element, x: float, y: float, content: str,
          **attrs: str) -> ET.Element:
    element = ET.SubElement(parent, 'text', x=str(x), y=str(y),
                            **{k.replace('_', '-'): v
                               for k, v in attrs.items()})
    element.text = content
    return element


def _badge(parent: ET.Element, x: int, y: int, colour: str) -> None:
    """The mark of a device out of the offer: a white disc with "!"."""
    ET.SubElement(parent, 'circle', {
        'cx': str(x), 'cy': str(y), 'r': '8', 'fill': '#ffffff',
        'stroke': colour, 'stroke-width': '2', 'class': 'withheld-mark'})
    _text(parent, x, y + 4, '!', font_size='12', font_weight='bold',
          fill=colour, text_anchor='middle', font_family='sans-serif')


def _draw_cell(parent: ET.Element, host_board: board.HostBoard,
               dev: pci_device.TrackedDevice, x: int, y: int) -> None:
    state = host_board.state(dev)
    holder = host_board.holder(dev)
    withholding = host_board.withholding(dev)
    cell = ET.SubElement(parent, 'g', {'class': 'device %s' % state})
    tip = ET.SubElement(cell, 'title')
    # On hover, all the device's records say of why it is out.
    tip.text = '%s: %s%s' % (dev.address, holder, ''.join(
        '; %s' % why for why in (dev.describe_health(), dev.withheld)
        if why))
    ET.SubElement(cell, 'rect', x=str(x), y=str(y), width=str(CELL_W),
                  height=str(CELL_H), rx='4', fill=COLOURS[state],
                  stroke='#263238')
    _text(cell, x + 6, y + 18, dev.address, font_size='12',
          fill='#ffffff', font_family='monospace')
    _text(cell, x + 6, y + 38, _short(holder), font_size='13',
          fill='#ffffff', font_weight='bold', font_family='sans-serif')
    if withholding is not None:
        _badge(cell, x + CELL_W - 13, y + 13,
               NOT_OFFERED_STROKE[withholding.state])
        if withholding.mark != holder:
            # Why it is out, under its holder (a server, "withheld").
            _text(cell, x + 6, y + 55, _short(withholding.mark, MARK_CHARS),
                  font_size='12', fill='#ffffff', font_family='sans-serif',
                  **{'class': 'withheld-mark'})


def _draw_box(parent: ET.Element, host_board: board.HostBoard, box: _Box,
              x: int, y: int, labelled: bool) -> None:
    if labelled:
        why = host_board.group_not_offered(box.group)
        attrs = {'x': str(x), 'y': str(y), 'width': str(box.width),
                 'height': str(box.height), 'rx': '6', 'fill': 'none',
                 'stroke': GROUP_STROKE, 'class': 'group'}
        label = box.group.name
        colour = '#37474f'
        if why:
            colour = NOT_OFFERED_STROKE[why[0].state]
            attrs.update({'stroke': colour, 'stroke-width': '2.5',
                          'stroke-dasharray': NOT_OFFERED_DASH,
                          'class': 'group withheld'})
            label += ' \u00b7 not offered'
        rect = ET.SubElement(parent, 'rect', attrs)
        if why:
            ET.SubElement(rect, 'title').text = '%s: %s' % (
                box.group.name, '; '.join(w.text for w in why))
        _text(parent, x + PAD, y + PAD + 11, label, font_size='12',
              fill=colour, font_family='sans-serif',
              font_weight='bold' if why else 'normal')
    top = y + PAD + (LABEL_H if labelled else 0)
    for offset, child in box.children:
        _draw_box(parent, host_board, child, x + offset, top, True)
    for offset, dev in box.cells:
        _draw_cell(parent, host_board, dev, x + offset, top)


def _reason_lines(host_board: board.HostBoard
                  ) -> list[tuple[board.Withholding, str]]:
    """Each reason capacity of the host is withheld, with the line that
    says it and the groups it takes out."""
    names: dict[str, list[str]] = {}

    def visit(group: board.Group) -> None:
        for child in group.children.values():
            for withholding in host_board.group_not_offered(child):
                names.setdefault(withholding.reason, []).append(child.name)
            visit(child)
    visit(host_board.tree())
    return [(w, w.text + (' \u2014 not offered: %s' % ', '.join(
        names[w.reason]) if w.reason in names else ''))
        for w in host_board.withholdings]


def _partitions_line(host_board: board.HostBoard) -> str:
    free = host_board.free_partitions()
    return 'Free partitions by size: ' + ', '.join(
        'size %d: %d' % item for item in sorted(free.items()))


def host_svg(host_board: board.HostBoard) -> ET.Element:
    """The ``<svg>`` element of one host's board."""
    box = _layout(host_board.tree(), False)
    reasons = _reason_lines(host_board)
    width = max([box.width, 420] + [
        2 * PAD + REASON_CHAR_W * len(line) for _, line in reasons])
    height = TITLE_H + box.height + REASON_H * len(reasons) + FOOTER_H
    svg = ET.Element('svg', {
        'xmlns': SVG_NS, 'width': str(width), 'height': str(height),
        'viewBox': '0 0 %d %d' % (width, height), 'class': 'board'})
    ET.SubElement(svg, 'rect', width=str(width), height=str(height),
                  fill='#fafafa')
    states = collections.Counter(host_board.state(d)
                                 for d in host_board.devices)
    out = ''.join(', %d %s' % (states[state], state)
                  for state in (board.UNHEALTHY, board.WITHHELD)
                  if states[state])
    _text(svg, PAD, 19, '%s: %d devices, %d used%s' % (
        host_board.host, len(host_board.devices), states[board.USED], out),
        font_size='15', font_weight='bold', font_family='sans-serif',
        fill='#212121')
    _draw_box(svg, host_board, box, 0, TITLE_H, False)
    y = TITLE_H + box.height
    for withholding, line in reasons:
        y += REASON_H
        _text(svg, PAD, y - 4, line, font_size='13', font_weight='bold',
              font_family='sans-serif', fill=NOT_OFFERED_STROKE[
                  withholding.state], **{'class': 'withheld-reason'})
    _text(svg, PAD, y + 16, _partitions_line(host_board),
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
    swatch = ET.SubElement(legend, 'span', style=(
        'display:inline-block;width:22px;height:12px;margin:0 4px 0 12px;'
        'vertical-align:middle;border:2px dashed %s' %
        NOT_OFFERED_STROKE[board.UNHEALTHY]))
    swatch.tail = 'group not offered (why: under its host)'


def _table(parent: ET.Element, table_id: str, head: tuple[str, ...],
           rows: list[tuple[str, ...]]) -> None:
    table = ET.SubElement(parent, 'table', id=table_id)
    row = ET.SubElement(table, 'tr')
    for title in head:
        ET.SubElement(row, 'th').text = title
    for values in rows:
        row = ET.SubElement(table, 'tr')
        for value in values:
            ET.SubElement(row, 'td').text = value


def fleet_html(boards: list[board.HostBoard]) -> str:
    """Every host's board on one HTML page; above them, side by side so
    that both are on the first screen, the fleet's free partitions per
    size and the servers holding devices."""
    html = ET.Element('html', lang='en')
    head = ET.SubElement(html, 'head')
    ET.SubElement(head, 'meta', charset='utf-8')
    ET.SubElement(head, 'title').text = 'PCI device boards'
    ET.SubElement(head, 'style').text = (
        'body{font-family:sans-serif;margin:16px;background:#fff}'
        'h1{margin:0 0 4px}h2{margin:12px 0 4px;font-size:1.2em}'
        'p.legend{margin:4px 0}'
        '.summary{display:flex;flex-wrap:wrap;gap:0 32px;'
        'align-items:flex-start}'
        'table{border-collapse:collapse;margin:4px 0 12px}'
        'td,th{border:1px solid #b0bec5;padding:3px 8px;text-align:left}'
        'svg.board{display:block;margin:8px 0 20px}')
    body = ET.SubElement(html, 'body')
    ET.SubElement(body, 'h1').text = 'PCI device boards'
    _legend(body)
    summary = ET.SubElement(body, 'div', {'class': 'summary'})
    per_host = {b.host: b.free_partitions() for b in boards}
    sizes = sorted({size for counts in per_host.values() for size in counts})
    column = ET.SubElement(summary, 'div')
    ET.SubElement(column, 'h2').text = 'Free partitions by size'
    _table(column, 'free-partitions', ('size', 'free', 'hosts'), [
        (str(size), str(sum(c.get(size, 0) for c in per_host.values())),
         ', '.join('%s %d' % (host, counts[size])
                   for host, counts in sorted(per_host.items())
                   if counts.get(size)) or '-')
        for size in sizes])
    column = ET.SubElement(summary, 'div')
    ET.SubElement(column, 'h2').text = 'Servers holding devices'
    _table(column, 'servers', ('server', 'host', 'devices'), sorted(
        (name, host_board.host, ' '.join(addresses))
        for host_board in boards
        for name, addresses in host_board.holders().items()))
    ET.SubElement(body, 'h2').text = 'Hosts'
    for host_board in boards:
        section = ET.SubElement(body, 'section', id='host-%s' %
                                host_board.host)
        section.append(host_svg(host_board))
    return '<!DOCTYPE html>\n' + ET.tostring(html, encoding='unicode',
                                             method='html')
