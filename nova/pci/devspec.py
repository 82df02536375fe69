"""Parse ``[pci]device_spec`` values and match host PCI devices against them.

A spec selects devices by vendor, product and address (or by the netdev
name of a NIC); every other key is a tag that travels with the matching
devices. Validation is strict and happens when nova-compute starts, so a bad
config stops the service with a message naming the offending value.
"""

import json
import os
import re

import os_traits
from oslo_log import log as logging
from oslo_utils import strutils

from nova import exception
from nova.pci import device as pci_device
from nova.pci import placement_names
from nova.pci import utils

LOG = logging.getLogger(__name__)

ANY = '*'

# Root of the sysfs tree; a module constant so tests can point it at a
# temporary directory.
SYSFS_ROOT = '/sys'

# Keys that select devices; everything else in a spec is a tag.
_MATCH_KEYS = ('vendor_id', 'product_id', 'address', 'devname')

# Tags parsed strictly as booleans, and the one upstream parses leniently.
_STRICT_BOOL_TAGS = ('managed', 'live_migratable', 'one_time_use')
_LENIENT_BOOL_TAGS = ('remote_managed',)
# Tags naming Placement objects: a number is refused rather than turned
# into a name nobody wrote. Value: the hint added to the error.
_STRING_TAGS = {
    'resource_class': ', e.g. "PGPU" or "CUSTOM_GPU"',
    'traits': ' of comma-separated trait names, e.g. "CUSTOM_A,CUSTOM_B"',
}
# Every key with a meaning to nova. Other keys are free-form tags matched
# against alias specs, unless they look like a misspelling of one of these
# (see utils.misspelling_of): a typo such as "vendorid" would otherwise
# become a tag and the spec would silently select every vendor's devices.
KNOWN_KEYS = tuple(sorted(_MATCH_KEYS + _STRICT_BOOL_TAGS +
                          _LENIENT_BOOL_TAGS + (
                              'group_name', 'group_type', 'physical_network',
                              'resource_class', 'traits', 'trusted')))

_MAX_ID = 0xffff
# (name, maximum, digits when normalized) in address order.
_ADDRESS_FIELDS = (
    ('domain', 0xffff, 4),
    ('bus', 0xff, 2),
    ('slot', 0x1f, 2),
    ('function', 0x7, 1),
)
_HEX_RE = re.compile(r'^(0[xX])?[0-9a-fA-F]+$')


# sysfs ----------------------------------------------------------------------

def netdev_pci_address(devname: str) -> str | None:
    """Return the PCI address behind network interface ``devname``.

    ``/sys/class/net/<name>/device`` links to the PCI device directory,
    whose name is the address. None when the interface does not exist or is
    not a PCI device.
    """
    link = os.path.join(SYSFS_ROOT, 'class', 'net', devname, 'device')
    try:
        target = os.readlink(link)
    except OSError:
        return None
    try:
        return utils.normalize_address(os.path.basename(target))
    except exception.PciDeviceWrongAddressFormat:
        return None


def is_sriov_pf(address: str) -> bool:
    """Return True when the host device at ``address`` is an SR-IOV PF.

    A PF advertises a positive ``sriov_totalvfs`` in sysfs; a missing or
    unreadable file means it is not one.
    """
    path = os.path.join(SYSFS_ROOT, 'bus', 'pci', 'devices', address,
                        'sriov_totalvfs')
    try:
        with open(path) as f:
            return int(f.read().strip()) > 0
    except (OSError, ValueError):
        return False


def sysfs_pci_id(address: str, name: str) -> str | None:
    """Return a hex id file of the host device at ``address`` (``vendor``,
    ``device`` or ``sriov_vf_device``) as 4 lower-case digits, or None
    when it is missing or unreadable."""
    path = os.path.join(SYSFS_ROOT, 'bus', 'pci', 'devices', address, name)
    try:
        with open(path) as f:
            return '%04x' % int(f.read().strip(), 16)
    except (OSError, ValueError):
        return None


# value parsing --------------------------------------------------------------

def _parse_hex(name: str, value: str, maximum: int) -> int:
    """Parse one hex field of a spec, naming it in any error."""
    text = value.strip()
    if not _HEX_RE.match(text):
        raise exception.PciConfigInvalidSpec(reason=(
            'property %s (%r) does not parse as a hex number; use hex '
            'digits, or "*" for any' % (name, value)))
    number = int(text, 16)
    if number > maximum:
        raise exception.PciConfigInvalidSpec(reason=(
            'property %s (%r) is greater than the maximum allowable value '
            '(%X)' % (name, value, maximum)))
    return number


def _parse_id(name: str, value: object) -> str:
    """Return a vendor/product id as 4 lower-case hex digits or ``*``."""
    if not isinstance(value, str):
        raise exception.PciConfigInvalidSpec(reason=(
            'property %s (%r) must be a string of up to 4 hex digits such '
            'as "10de", or "*" for any' % (name, value)))
    if value.strip() == ANY:
        return ANY
    return '%04x' % _parse_hex(name, value, _MAX_ID)


def _parse_bool_tag(name: str, value: object, strict: bool) -> str:
    """Return a bool-like tag normalized to "true" or "false"."""
    try:
        if not isinstance(value, (str, bool, int)):
            raise ValueError(value)
        parsed = strutils.bool_from_string(value, strict=strict)
    except ValueError:
        accepted = ', '.join(strutils.TRUE_STRINGS + strutils.FALSE_STRINGS)
        raise exception.PciConfigInvalidSpec(reason=(
            'cannot parse tag %r: unrecognized value %r, acceptable values '
            'are JSON true/false or one of: %s' % (name, value, accepted)))
    return 'true' if parsed else 'false'


def _tag_string(name: str, value: object) -> str:
    """Return a plain tag value as a string; structured values are refused
    because no consumer could compare them with an alias spec."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (int, float)):
        return str(value)
    raise exception.PciConfigInvalidSpec(reason=(
        'tag %r has value %r; tag values must be strings, numbers or '
        'booleans' % (name, value)))


# address matchers -----------------------------------------------------------

def _device_fields(address: object) -> tuple[str, ...] | None:
    """Split a device address into normalized (domain, bus, slot, function),
    or None when it is not a valid PCI address."""
    try:
        normal = utils.normalize_address(address)
    except exception.PciDeviceWrongAddressFormat:
        return None
    domain, bus, rest = normal.split(':')
    slot, function = rest.split('.')
    return domain, bus, slot, function


def _pf_address(fields: tuple[str, ...]) -> str | None:
    """The address of normalized ``fields`` when they name one SR-IOV PF
    of this host exactly; such a spec also selects the PF's VFs."""
    if ANY in fields:
        return None
    address = '%s:%s:%s.%s' % fields
    return address if is_sriov_pf(address) else None


def _is_vf_of(dev: pci_device.HostDevice, pf_address: str | None) -> bool:
    """True when ``dev`` is a VF of the PF at ``pf_address``."""
    if pf_address is None or not dev.parent_addr:
        return False
    return _device_fields(dev.parent_addr) == _device_fields(pf_address)


class _GlobAddress:
    """The glob form: each field is a concrete normalized value or ``*``."""

    def __init__(self, fields: tuple[str, ...]):
        self.fields = fields
        self.pf_address = _pf_address(fields)

    @classmethod
    def parse(cls, text: str) -> '_GlobAddress':
        """Parse ``[[[[domain]:]bus]:][slot][.[function]]``."""
        head, dot, function = text.partition('.')
        if not dot:
            function = ANY
        parts = head.split(':')
        if len(parts) > 3:
            raise exception.PciDeviceWrongAddressFormat(address=text)
        # Fields are right-aligned: one part is the slot, two bus:slot.
        raw = [ANY] * (3 - len(parts)) + parts + [function]
        fields = []
        for (name, maximum, digits), value in zip(_ADDRESS_FIELDS, raw):
            value = value.strip()
            if value in ('', ANY):
                fields.append(ANY)
            else:
                fields.append('%0*x' % (digits, _parse_hex(
                    name, value, maximum)))
        return cls(tuple(fields))

    def match(self, dev: pci_device.HostDevice) -> bool:
        fields = _device_fields(dev.address)
        if fields is None:
            return False
        if all(want in (ANY, got) for want, got in zip(self.fields, fields)):
            return True
        return _is_vf_of(dev, self.pf_address)


class _RegexAddress:
    """The dict form: one regex per field, prefix-matched (``re.match``)."""

    def __init__(self, spec: dict):
        allowed = [name for name, _max, _digits in _ADDRESS_FIELDS]
        unknown = sorted(set(spec) - set(allowed))
        if unknown:
            raise exception.PciDeviceWrongAddressFormat(message=(
                'The PCI address %r has unknown keys %s; allowed keys are '
                '%s.' % (spec, ', '.join(unknown), ', '.join(allowed))))
        self.patterns = []
        for name in allowed:
            pattern = spec.get(name, '.*')
            if not isinstance(pattern, str):
                raise exception.PciDeviceWrongAddressFormat(message=(
                    'The PCI address %r has a non-string %s %r; use a '
                    'regular expression string.' % (spec, name, pattern)))
            try:
                self.patterns.append(re.compile(pattern))
            except re.error as err:
                raise exception.PciDeviceWrongAddressFormat(message=(
                    'The PCI address %r has an invalid %s regular '
                    'expression %r: %s.' % (spec, name, pattern, err)))
        self.pf_address = _pf_address(self._literal_fields(spec))

    @staticmethod
    def _literal_fields(spec: dict) -> tuple[str, ...]:
        """Normalized fields where every pattern is plain hex digits (an
        exact address, as the string form writes it); ``*`` elsewhere."""
        fields = []
        for name, maximum, digits in _ADDRESS_FIELDS:
            pattern = spec.get(name, '')
            if not re.fullmatch('[0-9a-fA-F]+', pattern) or \
                    int(pattern, 16) > maximum:
                return (ANY,)
            fields.append('%0*x' % (digits, int(pattern, 16)))
        return tuple(fields)

    def match(self, dev: pci_device.HostDevice) -> bool:
        fields = _device_fields(dev.address)
        if fields is None:
            return False
        if all(p.match(value) for p, value in zip(self.patterns, fields)):
            return True
        return _is_vf_of(dev, self.pf_address)


class _NoAddress:
    """Stands in for a devname that does not exist on this host."""

    pf_address = None

    def match(self, dev: pci_device.HostDevice) -> bool:
        return False


# specs ----------------------------------------------------------------------

class PciDeviceSpec:
    """One parsed ``[pci]device_spec`` object.

    ``vendor_id``/``product_id`` are ``*`` or 4 lower-case hex digits;
    ``tags`` holds every other key as a string, with bool-like tags
    normalized to "true"/"false".
    """

    def __init__(self, spec: dict, report_in_placement: bool = False):
        if not isinstance(spec, dict):
            raise exception.PciConfigInvalidSpec(reason=(
                'invalid entry %r: expecting a JSON object' % (spec,)))
        self._text = json.dumps(spec, sort_keys=True, default=repr)
        self._check_misspelt_keys(spec)
        self.vendor_id = _parse_id('vendor_id', spec.get('vendor_id', ANY))
        self.product_id = _parse_id('product_id',
                                    spec.get('product_id', ANY))
        self._address = self._parse_address(spec, report_in_placement)
        self.tags = self._parse_tags(spec, report_in_placement)
        if self.remote_managed:
            self._check_remote_managed(spec)

    def __repr__(self) -> str:
        return 'PciDeviceSpec(%s)' % self._text

    def _check_misspelt_keys(self, spec: dict) -> None:
        for key in sorted(spec):
            meant = utils.misspelling_of(str(key), KNOWN_KEYS)
            if meant is not None:
                raise exception.PciConfigInvalidSpec(reason=(
                    '%s: key %r is not a known key and looks like a '
                    'misspelling of %r; known keys: %s (other keys are '
                    'tags and must not resemble a known key)' % (
                        self._text, key, meant, ', '.join(KNOWN_KEYS))))

    def _parse_address(self, spec: dict, report_in_placement: bool):
        if 'devname' in spec and 'address' in spec:
            raise exception.PciDeviceInvalidDeviceName()
        if 'devname' in spec:
            return self._parse_devname(spec['devname'], report_in_placement)
        address = spec.get('address', '')
        if isinstance(address, str):
            return _GlobAddress.parse(address)
        if isinstance(address, dict):
            return _RegexAddress(address)
        raise exception.PciDeviceWrongAddressFormat(message=(
            'PCI address %r is not valid; use a glob string '
            'such as "0000:1b:00.*" or a dict of regular expressions with '
            'keys domain, bus, slot and function.' % (address,)))

    def _parse_devname(self, devname: object, report_in_placement: bool):
        if report_in_placement:
            # A netdev name can move between devices; Placement needs
            # stable addresses for its providers.
            raise exception.PciConfigInvalidSpec(reason=(
                '%s: "devname" is not supported when '
                '[pci]report_in_placement is enabled; select the device '
                'with "address" instead' % self._text))
        if not isinstance(devname, str) or not devname:
            raise exception.PciConfigInvalidSpec(reason=(
                'property devname (%r) must be a non-empty network '
                'interface name' % (devname,)))
        address = netdev_pci_address(devname)
        if address is None:
            LOG.warning('PCI device spec %s: network interface %s does not '
                        'exist, the spec matches no device',
                        self._text, devname)
            return _NoAddress()
        return _GlobAddress(tuple(_device_fields(address)))

    def _parse_tags(self, spec: dict, report_in_placement: bool) -> dict:
        tags = {}
        for name, value in spec.items():
            if name in _MATCH_KEYS or value is None:
                # null means "unset", as upstream treats physical_network.
                continue
            if name in _STRING_TAGS and not isinstance(value, str):
                raise exception.PciConfigInvalidSpec(reason=(
                    '%s: %s (%r) must be a string%s' % (
                        self._text, name, value, _STRING_TAGS[name])))
            if name in _STRICT_BOOL_TAGS:
                tags[name] = _parse_bool_tag(name, value, strict=True)
            elif name in _LENIENT_BOOL_TAGS:
                tags[name] = _parse_bool_tag(name, value, strict=False)
            else:
                tags[name] = _tag_string(name, value)
        if tags.get('one_time_use') == 'true' and not report_in_placement:
            raise exception.PciConfigInvalidSpec(reason=(
                '%s: one_time_use=true requires [pci]report_in_placement '
                'to be enabled' % self._text))
        self._check_group_tags(spec, tags, report_in_placement)
        return tags

    def _check_group_tags(self, spec: dict, tags: dict,
                          report_in_placement: bool):
        """Validate the static group tags; normalizes group_type in place."""
        has_name = 'group_name' in tags
        has_type = 'group_type' in tags
        if not has_name and not has_type:
            return
        if has_name != has_type:
            raise exception.PciConfigInvalidSpec(reason=(
                '%s: group_name and group_type must be given together' %
                self._text))
        if not report_in_placement:
            raise exception.PciConfigInvalidSpec(reason=(
                '%s: group_name/group_type require [pci]report_in_placement '
                'to be enabled' % self._text))
        if not isinstance(spec['group_name'], str) or not spec[
                'group_name'].strip():
            raise exception.PciConfigInvalidSpec(reason=(
                '%s: group_name must be a non-empty string' % self._text))
        try:
            tags['group_type'] = utils.validate_group_type(
                spec['group_type'], self._text)
        except exception.Invalid as err:
            raise exception.PciConfigInvalidSpec(reason=err.kwargs.get(
                'reason', err.message))
        if 'physical_network' in tags:
            raise exception.PciConfigInvalidSpec(reason=(
                '%s: a spec with group_name/group_type cannot have '
                'physical_network; groups are for PCI passthrough, not '
                'Neutron ports' % self._text))

    def _check_remote_managed(self, spec: dict) -> None:
        """Refuse remote_managed where it cannot work, as upstream does.

        A remote-managed device is a VF whose port an off-path backend (a
        DPU) programs; it finds the card by its VPD serial number. A
        devname that does not exist cannot be resolved, and a PF cannot be
        remote managed: an address naming a PF is only accepted when
        ``product_id`` is the PF's VF product id (the spec then selects
        the VFs alone).
        """
        if isinstance(self._address, _NoAddress):
            raise exception.PciConfigInvalidSpec(reason=(
                '%s: remote_managed=true but network interface %r does '
                'not exist on this host, so the device cannot be found' % (
                    self._text, spec['devname'])))
        pf = self._address.pf_address
        if pf is None:
            return
        vf_product = sysfs_pci_id(pf, 'sriov_vf_device')
        pf_vendor = sysfs_pci_id(pf, 'vendor')
        pf_product = sysfs_pci_id(pf, 'device')
        vendor_ok = self.vendor_id in (ANY, pf_vendor)
        if vendor_ok and self.product_id == vf_product:
            return
        if vendor_ok and self.product_id in (ANY, pf_product):
            raise exception.PciConfigInvalidSpec(reason=(
                '%s: remote_managed=true is not supported for PFs, and '
                '%s is an SR-IOV PF; remote-managed devices are VFs, so '
                'set product_id to its VF product id %s to select its VFs'
                % (self._text, pf, vf_product or '(unknown)')))
        raise exception.PciConfigInvalidSpec(reason=(
            '%s: the vendor_id %s and product_id %s do not match the VFs '
            'of PF %s (vendor %s, VF product %s)' % (
                self._text, self.vendor_id, self.product_id, pf,
                pf_vendor or '(unknown)', vf_product or '(unknown)')))

    def match(self, dev: pci_device.HostDevice) -> bool:
        """Return True when host device ``dev`` is selected
        by this spec's vendor, product and address; a remote_managed spec
        also needs the device's VPD card serial number, by which the
        remote backend identifies the card."""
        for want, got in ((self.vendor_id, dev.vendor_id),
                          (self.product_id, dev.product_id)):
            if want != ANY and (not isinstance(got, str) or
                                got.lower() != want):
                return False
        if self.remote_managed and not dev.card_serial_number:
            return False
        return self._address.match(dev)

    @property
    def remote_managed(self) -> bool:
        """True for VFs an off-path backend (e.g. a DPU) manages."""
        return self.tags.get('remote_managed') == 'true'

    @property
    def group_name(self) -> str | None:
        """The static group the matching devices form, if any."""
        return self.tags.get('group_name')

    @property
    def group_type(self) -> str | None:
        """The lower-case type of the static group, if any."""
        return self.tags.get('group_type')

    @property
    def traits(self) -> set[str]:
        """Placement traits of the matching devices: the ``traits`` tag
        plus the standard traits of the ``live_migratable`` and
        ``one_time_use`` tags, as upstream reports them."""
        traits = placement_names.get_traits(self.tags.get('traits'))
        if self.tags.get('live_migratable') == 'true':
            traits.add(os_traits.HW_PCI_LIVE_MIGRATABLE)
        if self.one_time_use:
            traits.add(os_traits.HW_PCI_ONE_TIME_USE)
        return traits

    @property
    def one_time_use(self) -> bool:
        """True when a device must not be handed out again after its first
        use until an operator clears its reservation in Placement."""
        return self.tags.get('one_time_use') == 'true'

    def _explicit_resource_class(self) -> str | None:
        if self.tags.get('resource_class'):
            return self.tags['resource_class']
        if self.group_type:
            return placement_names.static_group_resource_class(self.group_type)
        return None

    @property
    def resource_class(self) -> str:
        """The Placement resource class of the devices this spec selects.

        It comes from the ``resource_class`` tag, else the static group
        type, else the spec's own ids. When the ids contain ``*`` the class
        differs per device: use ``resource_class_for`` instead.
        """
        explicit = self._explicit_resource_class()
        if explicit is None and ANY in (self.vendor_id, self.product_id):
            raise exception.PlacementPciException(error=(
                '%s has no resource_class tag and a wildcard vendor_id or '
                'product_id, so its resource class depends on the device'
                % self._text))
        return placement_names.get_resource_class(
            explicit, self.vendor_id, self.product_id)

    def resource_class_for(
            self, dev: pci_device.HostDevice | pci_device.TrackedDevice
    ) -> str:
        """The Placement resource class of device ``dev`` matched by this
        spec; the default ``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` uses the
        device's own ids."""
        return placement_names.get_resource_class(
            self._explicit_resource_class(), dev.vendor_id, dev.product_id)


class Whitelist:
    """All ``[pci]device_spec`` entries, in config order."""

    def __init__(self, specs: list[PciDeviceSpec]):
        self.specs = list(specs)
        self._check_group_types()

    @classmethod
    def from_config(cls, values: list[str],
                    report_in_placement: bool = False) -> 'Whitelist':
        """Parse the raw option values; each is a JSON object or a JSON
        list of objects."""
        specs = []
        for value in values:
            try:
                parsed = json.loads(value)
            except (TypeError, ValueError) as err:
                raise exception.PciConfigInvalidSpec(reason=(
                    'invalid entry %r: not valid JSON (%s); expecting a '
                    'JSON object or a list of objects' % (value, err)))
            if isinstance(parsed, dict):
                parsed = [parsed]
            elif not isinstance(parsed, list):
                raise exception.PciConfigInvalidSpec(reason=(
                    'invalid entry %r: expecting a JSON object or a list '
                    'of objects' % (value,)))
            for item in parsed:
                if not isinstance(item, dict):
                    raise exception.PciConfigInvalidSpec(reason=(
                        'invalid entry %r: list item %r is not a JSON '
                        'object' % (value, item)))
                specs.append(PciDeviceSpec(item, report_in_placement))
        return cls(specs)

    def _check_group_types(self):
        """One static group name must mean one group type everywhere."""
        types = {}
        for spec in self.specs:
            if spec.group_name is None:
                continue
            seen = types.setdefault(spec.group_name, spec.group_type)
            if seen != spec.group_type:
                raise exception.PciConfigInvalidSpec(reason=(
                    'group_name %r is given group_type %r and %r; a group '
                    'has a single type' % (spec.group_name, seen,
                                           spec.group_type)))

    def resource_classes(self) -> set[str]:
        """Placement classes these specs give devices, where known without
        the devices (a spec with wildcard ids and no resource_class tag
        gives each device its own CUSTOM_PCI_<VENDOR>_<PRODUCT>)."""
        classes = set()
        for spec in self.specs:
            explicit = spec._explicit_resource_class()
            if explicit is not None or ANY not in (spec.vendor_id,
                                                   spec.product_id):
                classes.add(spec.resource_class)
        return classes

    def device_assignable(self, dev: pci_device.HostDevice
                          ) -> PciDeviceSpec | None:
        """Return the first spec, in config order, matching ``dev``, or
        None when nova must not manage the device."""
        for spec in self.specs:
            if spec.match(dev):
                return spec
        return None

    def classify(self, devices: list[pci_device.HostDevice]
                 ) -> dict[str, PciDeviceSpec]:
        """The spec of each assignable device among ``devices``, by
        normalized address; devices no spec matches are left out.

        The compute matches the host's devices once per update and hands
        the result to everything that needs a device's spec (groups, PCI
        tracker, translator).
        """
        specs = {}
        for dev in devices:
            spec = self.device_assignable(dev)
            if spec is not None:
                specs[utils.normalize_address(dev.address)] = spec
        return specs
