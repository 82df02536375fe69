"""Render a page in headless Chromium and read the screenshot back.

For the tests of the board picture (``nova.fleet.board_svg``): Debian's
``chromium`` (``tools/install.sh`` installs it) takes the screenshot, and
the PNG is decoded here with the standard library (zlib), as the project
has no image library.
"""

import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib

CHROMIUM = 'chromium'
_PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
# Bytes per pixel of the 8-bit colour types Chromium writes: RGB, RGBA.
_CHANNELS = {2: 3, 6: 4}


def chromium_missing() -> str | None:
    """Why no page can be rendered here, or None."""
    if shutil.which(CHROMIUM) is None:
        return ('%s is not installed (tools/install.sh installs Debian\'s '
                'chromium)' % CHROMIUM)
    return None


def _run(args: list[str], workdir: str) -> subprocess.CompletedProcess:
    # As root Chromium runs only without its sandbox; a profile of its
    # own keeps parallel runs apart.
    return subprocess.run(
        [CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu',
         '--hide-scrollbars', '--user-data-dir=%s' % os.path.join(
             workdir, 'profile')] + args,
        capture_output=True, text=True, timeout=120, check=True)


def screenshot(html_path: str, width: int, height: int) -> bytes:
    """PNG bytes of ``html_path`` rendered at ``width`` x ``height``."""
    with tempfile.TemporaryDirectory() as workdir:
        png = os.path.join(workdir, 'page.png')
        _run(['--screenshot=%s' % png, '--window-size=%d,%d' % (
            width, height), 'file://' + os.path.abspath(html_path)],
            workdir)
        with open(png, 'rb') as f:
            return f.read()


def dom(html_path: str) -> str:
    """The page's DOM as Chromium parsed it (``--dump-dom``)."""
    with tempfile.TemporaryDirectory() as workdir:
        return _run(['--dump-dom', 'file://' + os.path.abspath(html_path)],
                    workdir).stdout


# Appended to a copy of the page: writes where the element of the CSS
# selector lies into the <body>, for ``--dump-dom`` to show.
_BOX_SCRIPT = (
    '<script>(function(){var e=document.querySelector(%s);var r=e&&'
    'e.getBoundingClientRect();document.body.setAttribute("data-box",'
    'r?[r.left,r.top,r.width,r.height].join(" "):"none");})();</script>')
_BOX_ATTR = re.compile(r'data-box="([^"]*)"')


def bounding_box(html_path: str, selector: str, width: int, height: int
                 ) -> tuple[float, float, float, float] | None:
    """(left, top, width, height) in CSS pixels of the first element
    matching ``selector`` on ``html_path`` laid out in a ``width`` x
    ``height`` window, as Chromium's layout puts it (None: no such
    element). The page is copied with a script that measures it."""
    with open(html_path, encoding='utf-8') as f:
        page = f.read()
    with tempfile.TemporaryDirectory() as workdir:
        measured = os.path.join(workdir, 'measured.html')
        with open(measured, 'w', encoding='utf-8') as f:
            f.write(page.replace('</body>', _BOX_SCRIPT % json.dumps(
                selector) + '</body>'))
        out = _run(['--window-size=%d,%d' % (width, height), '--dump-dom',
                    'file://' + measured], workdir).stdout
    found = _BOX_ATTR.search(out)
    if found is None:
        raise ValueError('the page %s did not run the measuring script'
                         % html_path)
    if found.group(1) == 'none':
        return None
    left, top, box_width, box_height = map(float, found.group(1).split())
    return left, top, box_width, box_height


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def pixels(png: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    """Width, height and the RGB pixels, row by row, of a non-interlaced
    8-bit RGB or RGBA PNG. ValueError for any other PNG."""
    if not png.startswith(_PNG_SIGNATURE):
        raise ValueError('not a PNG file')
    pos, data = len(_PNG_SIGNATURE), b''
    header = None
    while pos < len(png):
        length, kind = struct.unpack('>I4s', png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b'IHDR':
            header = struct.unpack('>IIBBBBB', body)
        elif kind == b'IDAT':
            data += body
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in _CHANNELS or interlace:
        raise ValueError('PNG of depth %d, colour type %d, interlace %d; '
                         'only 8-bit RGB(A) without interlace is read' % (
                             depth, colour, interlace))
    step = _CHANNELS[colour]
    stride = width * step
    raw = zlib.decompress(data)
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - step] if i >= step else 0
            up = previous[i]
            corner = previous[i - step] if i >= step else 0
            predictor = (0, left, up, (left + up) // 2,
                         _paeth(left, up, corner))[kind]
            line[i] = (line[i] + predictor) & 0xff
        rows.extend(tuple(line[x:x + 3]) for x in range(0, stride, step))
        previous = line
    return width, height, rows
