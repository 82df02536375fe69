"""Whether this machine can run the real-hypervisor tests, and the skip
(or, where it is required, the failure) when it cannot.

The real-hypervisor tests boot guests on ``qemu:///system``: they need
``/dev/kvm`` usable by this user and a running ``libvirtd`` (with
``virtlogd``; ``.ci/run`` starts both). Where the machine lacks them the
tests skip, the reason shows in ``tools/test_summary.py``'s output; with
``NOVA_REQUIRE_REAL_HYPERVISOR=1`` (``.ci/run`` sets it: the project's
machines have ``/dev/kvm``) the skip is a failure instead.
"""

import os

from nova import exception
from nova.virt.libvirt import host as libvirt_host

URI = 'qemu:///system'
KVM_DEVICE = '/dev/kvm'
REQUIRE_ENV = 'NOVA_REQUIRE_REAL_HYPERVISOR'
VIRT_TYPE_ENV = 'NOVA_REAL_HYPERVISOR_VIRT_TYPE'
# The kernel module of PVM, a KVM that runs nested without hardware
# virtualization: its /dev/kvm runs only guest kernels built for PVM, so
# a stock Debian kernel (the test image's) never prints a line under it.
PVM_MODULE = '/sys/module/kvm_pvm'


def unavailable_reason() -> str | None:
    """Why the real hypervisor cannot be used here, or None."""
    if not os.path.exists(KVM_DEVICE):
        return '%s is missing (no KVM on this machine)' % KVM_DEVICE
    if not os.access(KVM_DEVICE, os.R_OK | os.W_OK):
        return ('%s is not readable and writable by this user (give it to '
                'group kvm with mode 0660, and this user to group kvm)' %
                KVM_DEVICE)
    try:
        libvirt_host.Host(URI).get_connection().close()
    except exception.HypervisorUnavailable as err:
        return 'libvirtd does not answer: %s' % err
    return None


def skip_unless_real_hypervisor(testcase) -> None:
    """Skip ``testcase`` (a running test) naming why the real hypervisor
    is unavailable; fail it instead when ``NOVA_REQUIRE_REAL_HYPERVISOR``
    is 1."""
    reason = unavailable_reason()
    if reason is None:
        return
    if os.environ.get(REQUIRE_ENV) == '1':
        testcase.fail('the real hypervisor is required (%s=1) but %s' % (
            REQUIRE_ENV, reason))
    testcase.skipTest('no real hypervisor: %s' % reason)


def virt_type() -> tuple[str, str]:
    """The ``[libvirt]virt_type`` real guests run with here, and why:
    ``NOVA_REAL_HYPERVISOR_VIRT_TYPE`` if set, else ``qemu`` (QEMU's
    emulator, on the same real libvirtd) where /dev/kvm is PVM's, else
    ``kvm``."""
    chosen = os.environ.get(VIRT_TYPE_ENV)
    if chosen:
        if chosen not in ('kvm', 'qemu'):
            raise ValueError('%s=%r is not allowed; kvm or qemu' % (
                VIRT_TYPE_ENV, chosen))
        return chosen, 'set by %s' % VIRT_TYPE_ENV
    if os.path.exists(PVM_MODULE):
        return 'qemu', ('%s is PVM (%s), which boots only PVM guest '
                        'kernels' % (KVM_DEVICE, PVM_MODULE))
    return 'kvm', '%s is hardware KVM' % KVM_DEVICE


class BootDeadlines:
    """How long a real guest's boot may take, from this machine's speed.

    The first boot measured gets ``first`` seconds (generous: it is the
    only one without a measurement); every later one ``factor`` times
    the slowest boot measured so far, and at least ``floor`` seconds.
    A slow or loaded machine (TCG on two shared cores) so makes the test
    slower, not red. ``boots`` keeps each measured boot's seconds, for
    the test's details.
    """

    def __init__(self, first: float = 900.0, factor: float = 3.0,
                 floor: float = 120.0) -> None:
        self.first = first
        self.factor = factor
        self.floor = floor
        self.boots: list[float] = []

    def timeout(self) -> float:
        """The seconds the next boot may take."""
        if not self.boots:
            return self.first
        return max(self.floor, self.factor * max(self.boots))

    def record(self, seconds: float) -> None:
        """Note how long a boot took."""
        self.boots.append(seconds)
