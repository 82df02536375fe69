#!/usr/bin/env python3
"""Build the tiny bootable test image the real-hypervisor tests boot.

The image is a raw disk holding one FAT filesystem (no partition table)
with SYSLINUX in its boot sector, SYSLINUX's EFI build as the removable
media boot loader (``EFI/BOOT/BOOTX64.EFI``), Debian's kernel and an
initramfs whose only program is busybox. Its init prints ``MARKER``, one
line per device in ``/sys/bus/pci/devices``::

    PCI <address> <vendor> <device> numa_node=<node> [bar64=<start> ...]

(``bar64`` once per assigned or unassigned 64-bit prefetchable memory BAR,
its start address in hex from the device's sysfs ``resource``) and
``MARKER-END`` to the serial console (``console=ttyS0``), and stays up;
the ACPI power button powers it off, so libvirt's soft reboot (a power
button press turned into a reset) reboots it. It boots with BIOS firmware
(SeaBIOS, through SYSLINUX) and with UEFI (OVMF without Secure Boot
starts ``EFI/BOOT/BOOTX64.EFI``, SYSLINUX's EFI loader, with no shell or
boot entry needed); both read the same ``syslinux.cfg``.

Everything comes from Debian packages: the kernel and its ACPI ``button``
module from the ``linux-image-amd64`` package's kernel (the
installed one when its modules are there, else the ``.deb`` that
``apt-get download`` fetches), ``busybox-static``, ``syslinux``,
``syslinux-efi`` and ``mtools``/``dosfstools`` (which write the FAT
image without loop mounts). The result is cached under a name keyed by
every input, so a second run only prints the path.

Usage: ``tools/build_test_image.py [--cache-dir DIR]``; prints the image
path.
"""

import argparse
import dataclasses
import glob
import gzip
import hashlib
import io
import os
import shutil
import stat
import subprocess
import sys
import tempfile

MARKER = 'NOVA-TEST-IMAGE-BOOTED'
# Bumped when the image layout or init changes (part of the cache key).
LAYOUT_VERSION = '2'
DEFAULT_CACHE_DIR = '/var/tmp/nova-test-image'
BUSYBOX = '/bin/busybox'
# SYSLINUX's EFI loader and its core module (package syslinux-efi and
# syslinux-common): OVMF starts the loader from the removable media path.
SYSLINUX_EFI = '/usr/lib/SYSLINUX.EFI/efi64/syslinux.efi'
LDLINUX_E64 = '/usr/lib/syslinux/modules/efi64/ldlinux.e64'
IMAGE_MIB = 32
MODULES = ('kernel/drivers/acpi/button.ko',)

INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo {marker}
# Each device's 64-bit prefetchable memory BARs (resource flags MEM,
# PREFETCH and MEM_64 of include/linux/ioport.h) by start address: 0 or
# missing when the firmware and kernel left one unassigned.
for dev in /sys/bus/pci/devices/*; do
    bars=
    while read start end flags; do
        if [ $(( flags & 0x102200 )) = $(( 0x102200 )) ]; then
            bars="$bars bar64=$start"
        fi
    done < $dev/resource
    echo "PCI ${{dev##*/}} $(cat $dev/vendor) $(cat $dev/device)" \
        "numa_node=$(cat $dev/numa_node)$bars"
done
echo {marker}-END
# The ACPI power button (libvirt's soft reboot and shutdown press it):
# power off, as an OS does; libvirt turns that into a reset on a reboot.
# The button driver enables the event; its count shows the presses.
insmod /lib/button.ko
presses=/sys/firmware/acpi/interrupts/ff_pwr_btn
while sleep 1; do
    read count _ < $presses
    if [ "$count" != 0 ]; then echo power button; poweroff -f; fi
done
""".format(marker=MARKER)

CMDLINE = 'console=ttyS0,115200 panic=-1 loglevel=4'
SYSLINUX_CFG = """SERIAL 0 115200
DEFAULT nova
PROMPT 0
TIMEOUT 0
LABEL nova
  KERNEL /vmlinuz
  INITRD /initrd.gz
  APPEND {cmdline}
""".format(cmdline=CMDLINE)
# Where each loader looks for its configuration: the BIOS one in the
# root, the EFI one beside itself.
SYSLINUX_CFG_PATHS = ('syslinux.cfg', 'EFI/BOOT/syslinux.cfg')


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A kernel image and the modules the init loads, by file path."""
    version: str
    vmlinuz: str
    modules: tuple[str, ...]


def _run(*cmd: str, cwd: str | None = None) -> None:
    try:
        subprocess.run(cmd, check=True, cwd=cwd, capture_output=True)
    except FileNotFoundError:
        sys.exit('%s is missing; tools/install.sh installs it' % cmd[0])
    except subprocess.CalledProcessError as err:
        sys.exit('%s failed: %s' % (' '.join(cmd),
                                    err.stderr.decode(errors='replace')))


def _installed_kernel() -> Kernel | None:
    """The newest installed kernel whose modules are present, if any."""
    for vmlinuz in sorted(glob.glob('/boot/vmlinuz-*'), reverse=True):
        version = vmlinuz[len('/boot/vmlinuz-'):]
        modules = tuple('/lib/modules/%s/%s' % (version, m)
                        for m in MODULES)
        if all(os.path.exists(m) for m in modules):
            return Kernel(version, vmlinuz, modules)
    return None


def _downloaded_kernel(cache_dir: str) -> Kernel:
    """The kernel of Debian's ``linux-image-amd64``, fetched with
    ``apt-get download`` and unpacked under ``cache_dir``."""
    depends = subprocess.run(
        ['apt-cache', 'depends', 'linux-image-amd64'], check=True,
        capture_output=True, text=True).stdout
    package = next((line.split()[-1] for line in depends.splitlines()
                    if line.strip().startswith('Depends: linux-image-')),
                   None)
    if package is None:
        sys.exit('apt-cache names no kernel package behind '
                 'linux-image-amd64; run apt-get update')
    version = package[len('linux-image-'):]
    root = os.path.join(cache_dir, 'kernel-' + version)
    kernel = Kernel(version, os.path.join(root, 'boot/vmlinuz-' + version),
                    tuple(os.path.join(root, 'lib/modules', version, m)
                          for m in MODULES))
    if all(os.path.exists(p) for p in (kernel.vmlinuz,) + kernel.modules):
        return kernel
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        _run('apt-get', 'download', package, cwd=tmp)
        deb, = glob.glob(os.path.join(tmp, '*.deb'))
        unpacked = os.path.join(tmp, 'root')
        os.mkdir(unpacked)
        members = ['./boot/vmlinuz-' + version] + [
            './lib/modules/%s/%s' % (version, m) for m in MODULES]
        tar = subprocess.Popen(['dpkg-deb', '--fsys-tarfile', deb],
                               stdout=subprocess.PIPE)
        subprocess.run(['tar', '-x', '-C', unpacked] + members,
                       stdin=tar.stdout, check=True)
        if tar.wait() != 0:
            sys.exit('dpkg-deb could not unpack %s' % deb)
        shutil.rmtree(root, ignore_errors=True)
        os.rename(unpacked, root)
    return kernel


def _cpio_entry(name: str, mode: int, data: bytes = b'',
                rdev: tuple[int, int] = (0, 0)) -> bytes:
    """One ``newc`` cpio member (what the kernel unpacks as initramfs)."""
    fields = [0, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1],
              len(name) + 1, 0]
    header = b'070701' + b''.join(b'%08X' % f for f in fields)
    entry = header + name.encode() + b'\0'
    entry += b'\0' * (-len(entry) % 4) + data
    return entry + b'\0' * (-len(entry) % 4)


def initramfs(kernel: Kernel) -> bytes:
    """The gzipped initramfs: busybox, the init script, two modules."""
    out = io.BytesIO()
    for directory in ('bin', 'dev', 'lib', 'proc', 'sys'):
        out.write(_cpio_entry(directory, stat.S_IFDIR | 0o755))
    # The kernel opens /dev/console for init before init mounts /dev.
    out.write(_cpio_entry('dev/console', stat.S_IFCHR | 0o600,
                          rdev=(5, 1)))
    with open(BUSYBOX, 'rb') as f:
        out.write(_cpio_entry('bin/busybox', stat.S_IFREG | 0o755,
                              f.read()))
    out.write(_cpio_entry('init', stat.S_IFREG | 0o755, INIT.encode()))
    for module in kernel.modules:
        with open(module, 'rb') as f:
            out.write(_cpio_entry('lib/' + os.path.basename(module),
                                  stat.S_IFREG | 0o644, f.read()))
    out.write(_cpio_entry('TRAILER!!!', 0))
    return gzip.compress(out.getvalue(), mtime=0)


def _cache_key(kernel: Kernel) -> str:
    digest = hashlib.sha256(LAYOUT_VERSION.encode())
    for path in (kernel.vmlinuz, BUSYBOX, SYSLINUX_EFI,
                 LDLINUX_E64) + kernel.modules:
        with open(path, 'rb') as f:
            digest.update(hashlib.sha256(f.read()).digest())
    digest.update((INIT + SYSLINUX_CFG).encode())
    return digest.hexdigest()[:16]


def build(cache_dir: str = DEFAULT_CACHE_DIR) -> str:
    """Build the image unless cached; return its path."""
    os.makedirs(cache_dir, exist_ok=True)
    # QEMU (another user under qemu:///system) reads the image through
    # the overlays: every directory on the way must be searchable.
    os.chmod(cache_dir, 0o755)
    for path, package in ((BUSYBOX, 'busybox-static'),
                          (SYSLINUX_EFI, 'syslinux-efi'),
                          (LDLINUX_E64, 'syslinux-common')):
        if not os.path.exists(path):
            sys.exit('%s is missing; install %s (tools/install.sh does)'
                     % (path, package))
    kernel = _installed_kernel() or _downloaded_kernel(cache_dir)
    image = os.path.join(cache_dir, 'test-%s.raw' % _cache_key(kernel))
    if os.path.exists(image):
        return image
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        disk = os.path.join(tmp, 'disk.raw')
        _run('mkfs.vfat', '-n', 'NOVATEST', '-C', disk,
             str(IMAGE_MIB * 1024))
        files = {'vmlinuz': kernel.vmlinuz,
                 'EFI/BOOT/BOOTX64.EFI': SYSLINUX_EFI,
                 'EFI/BOOT/ldlinux.e64': LDLINUX_E64}
        written = [('initrd.gz', initramfs(kernel))] + [
            (path, SYSLINUX_CFG.encode()) for path in SYSLINUX_CFG_PATHS]
        for index, (name, data) in enumerate(written):
            files[name] = os.path.join(tmp, 'file%d' % index)
            with open(files[name], 'wb') as f:
                f.write(data)
        _run('mmd', '-i', disk, '::EFI', '::EFI/BOOT')
        for name, path in files.items():
            _run('mcopy', '-i', disk, path, '::' + name)
        _run('syslinux', '--install', disk)
        os.chmod(disk, 0o644)
        os.rename(disk, image)
    return image


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--cache-dir', default=DEFAULT_CACHE_DIR,
                        help='where the image (and a downloaded kernel) '
                             'is kept (default: %(default)s)')
    args = parser.parse_args(argv)
    print(build(args.cache_dir))
    return 0


if __name__ == '__main__':
    sys.exit(main())
