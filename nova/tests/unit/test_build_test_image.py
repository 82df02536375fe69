"""tools/build_test_image.py: the initramfs it writes."""

import gzip
import os

import fixtures

from nova import test
from nova.tests.unit import tool


def _newc_members(archive: bytes) -> dict[str, tuple[int, bytes]]:
    """name -> (mode, data) of a newc cpio archive."""
    members = {}
    offset = 0
    while True:
        header = archive[offset:offset + 110]
        assert header[:6] == b'070701', header
        fields = [int(header[6 + 8 * i:14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = fields[1], fields[6], fields[11]
        name_start = offset + 110
        name = archive[name_start:name_start + namesize - 1].decode()
        data_start = name_start + namesize
        data_start += -data_start % 4
        data = archive[data_start:data_start + size]
        offset = data_start + size
        offset += -offset % 4
        if name == 'TRAILER!!!':
            return members
        members[name] = (mode, data)


class InitramfsTest(test.TestCase):

    def test_members(self):
        build = tool.load('build_test_image')
        tmp = self.useFixture(fixtures.TempDir()).path
        busybox = os.path.join(tmp, 'busybox')
        module = os.path.join(tmp, 'button.ko')
        for path, data in ((busybox, b'\x7fELF busybox'),
                           (module, b'\x7fELF module')):
            with open(path, 'wb') as f:
                f.write(data)
        # A module of its own (tool.load executes it afresh).
        build.BUSYBOX = busybox
        kernel = build.Kernel('6.1', '/boot/vmlinuz', (module,))

        members = _newc_members(gzip.decompress(build.initramfs(kernel)))

        self.assertEqual({'bin', 'dev', 'lib', 'proc', 'sys', 'dev/console',
                          'bin/busybox', 'init', 'lib/button.ko'},
                         set(members))
        self.assertEqual(b'\x7fELF busybox', members['bin/busybox'][1])
        self.assertEqual(0o020600, members['dev/console'][0])
        self.assertEqual(0o100755, members['init'][0])
        init = members['init'][1].decode()
        self.assertTrue(init.startswith('#!/bin/busybox sh\n'))
        self.assertIn('echo %s\n' % build.MARKER, init)
        self.assertIn('/sys/bus/pci/devices/*', init)
        self.assertIn('insmod /lib/button.ko', init)
