"""tools/build_test_image.py: the initramfs it writes."""

import gzip
import os
import subprocess

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


class PciListingTest(test.TestCase):
    """The init's PCI listing, run by the host's busybox on a fake
    sysfs: what the GPU boot test reads from the guest's console."""

    def _listing(self, devices: dict[str, dict[str, str]]) -> list[str]:
        build = tool.load('build_test_image')
        if not os.path.exists(build.BUSYBOX):
            self.fail('%s is missing: install busybox-static '
                      '(tools/install.sh does)' % build.BUSYBOX)
        root = self.useFixture(fixtures.TempDir()).path
        for address, files in devices.items():
            os.mkdir(os.path.join(root, address))
            for name, text in files.items():
                with open(os.path.join(root, address, name), 'w') as f:
                    f.write(text)
        init = build.INIT
        loop = init[init.index('for dev in'):init.index('done\n') + 5]
        result = subprocess.run(
            [build.BUSYBOX, 'sh', '-c',
             loop.replace('/sys/bus/pci/devices', root)],
            capture_output=True, text=True, check=True)
        return result.stdout.splitlines()

    def test_devices_nodes_and_64bit_bars(self):
        unused = '0x%016x 0x%016x 0x%016x\n' % (0, 0, 0)
        testdev = (
            # BAR0: 32-bit memory; BAR1: I/O; BAR2: 64-bit prefetchable
            # (flags MEM | PREFETCH | MEM_64 | sizing bits) at 896 GiB.
            '0x00000000c0000000 0x00000000c0000fff 0x0000000000040200\n'
            '0x000000000000c000 0x000000000000c00f 0x0000000000040101\n'
            '0x000000e080000000 0x000000e0ffffffff 0x000000000014220c\n'
            + unused * 3)
        # 64-bit but not prefetchable (as an NVMe's BAR0): left out.
        nvme = '0x00000000c1000000 0x00000000c1003fff 0x0000000000140204\n'
        lines = self._listing({
            '0000:81:00.0': {'vendor': '0x1b36\n', 'device': '0x0005\n',
                             'numa_node': '1\n', 'resource': testdev},
            '0000:00:04.0': {'vendor': '0x144d\n', 'device': '0xa80a\n',
                             'numa_node': '-1\n',
                             'resource': nvme + unused * 5}})
        self.assertEqual([
            'PCI 0000:00:04.0 0x144d 0xa80a numa_node=-1',
            'PCI 0000:81:00.0 0x1b36 0x0005 numa_node=1 '
            'bar64=0x000000e080000000'], lines)
