"""Skipping tests that need the real hypervisor where it is missing.

Tests that talk to ``qemu:///system`` (a real libvirtd with QEMU/KVM) call
``skip_unless_real_hypervisor`` first: without ``/dev/kvm`` or a libvirtd
answering, the test is skipped with the reason in the test summary
instead of failing for want of the machine kind.
"""

import os

import libvirt
import testtools

URI = 'qemu:///system'


def missing_real_hypervisor() -> str | None:
    """Why the real hypervisor cannot be used here, or None if it can."""
    if not os.path.exists('/dev/kvm'):
        return '/dev/kvm is missing (no KVM on this machine)'
    if not os.access('/dev/kvm', os.R_OK | os.W_OK):
        return '/dev/kvm is not readable and writable by this user'
    try:
        conn = libvirt.open(URI)
    except libvirt.libvirtError as err:
        return 'libvirtd does not answer at %s: %s' % (URI, err)
    conn.close()
    return None


def skip_unless_real_hypervisor(testcase: testtools.TestCase) -> None:
    """Skip ``testcase`` naming what is missing, unless /dev/kvm and a
    libvirtd at qemu:///system are there."""
    reason = missing_real_hypervisor()
    if reason:
        testcase.skipTest('real hypervisor test skipped: ' + reason)
