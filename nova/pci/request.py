"""PCI aliases from ``[pci]alias`` and the PCI requests a flavor makes.

An alias names a kind of device; the flavor extra spec
``pci_passthrough:alias=<name>:<count>[,...]`` asks for devices by alias.
This module validates the alias config (compatible with upstream Nova's
keys, plus ``group_type`` for device groups), parses the extra spec and
turns it into one ``InstancePCIRequest`` per requested item.
"""

import copy
import dataclasses
import json
import uuid

import jsonschema
from oslo_utils import strutils

from nova import exception
from nova.pci import device as pci_device
from nova.pci import devspec
from nova.pci import numa as pci_numa
from nova.pci import placement_names
from nova.pci import utils

NUMA_POLICIES = (pci_numa.LEGACY, pci_numa.PREFERRED, pci_numa.REQUIRED,
                 pci_numa.SOCKET)
DEFAULT_NUMA_POLICY = pci_numa.LEGACY

EXTRA_SPEC_ALIAS = 'pci_passthrough:alias'
EXTRA_SPEC_NUMA_POLICY = 'hw:pci_numa_affinity_policy'

_HEX4 = '^[0-9a-fA-F]{4}$'

_ALIAS_SCHEMA = {
    'type': 'object',
    'additionalProperties': False,
    'required': ['name'],
    'properties': {
        'name': {'type': 'string', 'minLength': 1, 'maxLength': 256},
        'vendor_id': {'type': 'string', 'pattern': _HEX4},
        'product_id': {'type': 'string', 'pattern': _HEX4},
        'device_type': {'type': 'string',
                        'enum': list(pci_device.DEVICE_TYPES)},
        'numa_policy': {'type': 'string', 'enum': list(NUMA_POLICIES)},
        'resource_class': {'type': 'string'},
        'traits': {'type': 'string'},
        'live_migratable': {'type': 'string'},
        # Legacy upstream key, accepted for compatibility and otherwise
        # ignored: it carries no matching meaning.
        'capability_type': {'type': 'string', 'enum': ['pci']},
        'group_type': {'type': 'string'},
    },
}
_ALIAS_VALIDATOR = jsonschema.Draft202012Validator(_ALIAS_SCHEMA)

# Alias keys copied unchanged into the upstream-shaped request spec.
_SPEC_KEYS = ('vendor_id', 'product_id', 'resource_class', 'traits')

_EXPECTED_FORM = ('expected "<alias name>:<count>[,<alias name>:<count>...]"'
                  ' with a positive integer count, e.g. "h200:2"')


def _spec_resource_class(spec: dict) -> str:
    return placement_names.get_resource_class(
        spec.get('resource_class'), spec.get('vendor_id'),
        spec.get('product_id'))


@dataclasses.dataclass(frozen=True)
class PciAlias:
    """One alias name with its specs; a device matching any spec fits."""

    name: str
    specs: tuple[dict, ...]
    numa_policy: str = DEFAULT_NUMA_POLICY
    device_type: str | None = None
    group_type: str | None = None

    @property
    def resource_class(self) -> str:
        """Placement resource class requested for this alias."""
        return _spec_resource_class(self.specs[0])

    @property
    def traits(self) -> set[str]:
        """Placement traits every device of this alias must have."""
        return placement_names.get_traits(self.specs[0].get('traits'))


@dataclasses.dataclass
class InstancePCIRequest:
    """``count`` devices of one alias, as asked for by a flavor."""

    request_id: str
    alias_name: str
    count: int
    spec: list[dict]
    numa_policy: str
    group_type: str | None
    resource_class: str
    traits: set[str]


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    # json.loads silently keeps the last of repeated keys; an operator who
    # writes a key twice almost certainly made a mistake, so say so.
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError('key %r is given more than once' % key)
        result[key] = value
    return result


def _schema_error_text(error: jsonschema.ValidationError) -> str:
    """Render a jsonschema error as "'<key>' <value> <problem>"."""
    key = '/'.join(str(p) for p in error.path)
    prefix = "'%s' " % key if key else ''
    if error.validator == 'additionalProperties':
        return '%s; allowed keys are %s' % (
            error.message, ', '.join(sorted(_ALIAS_SCHEMA['properties'])))
    if error.validator == 'pattern':
        return '%s%r is not 4 hexadecimal digits' % (prefix, error.instance)
    return prefix + error.message


def _parse_one(value: str) -> tuple[str, dict, str, str | None, str | None]:
    """Validate one alias value; return name, spec, numa, dev type, group."""
    where = 'alias %s' % value
    try:
        data = json.loads(value, object_pairs_hook=_reject_duplicate_keys)
    except ValueError as exc:
        raise exception.PciInvalidAlias(
            reason='%s is not a valid JSON object: %s' % (where, exc))
    errors = sorted(_ALIAS_VALIDATOR.iter_errors(data),
                    key=lambda e: (list(map(str, e.path)), e.message))
    if errors:
        raise exception.PciInvalidAlias(reason='%s: %s' % (
            where, '; '.join(_schema_error_text(e) for e in errors)))

    name = data['name'].strip()
    if not name:
        raise exception.PciInvalidAlias(
            reason="%s: 'name' must not be blank" % where)

    spec = {key: data[key] for key in _SPEC_KEYS if key in data}
    device_type = data.get('device_type')
    if device_type is not None:
        spec['dev_type'] = device_type
    if 'live_migratable' in data:
        try:
            flag = strutils.bool_from_string(data['live_migratable'],
                                             strict=True)
        except ValueError as exc:
            raise exception.PciInvalidAlias(
                reason="%s: 'live_migratable': %s" % (where, exc))
        spec['live_migratable'] = 'true' if flag else 'false'

    group_type = data.get('group_type')
    if group_type is not None:
        try:
            group_type = utils.validate_group_type(group_type, where)
        except exception.Invalid as exc:
            raise exception.PciInvalidAlias(reason=exc.kwargs['reason'])

    numa_policy = data.get('numa_policy', DEFAULT_NUMA_POLICY)
    return name, spec, numa_policy, device_type, group_type


def _show(value: str | None) -> str:
    return 'unset' if value is None else repr(value)


def _check_same(name: str, what: str, first: str | None,
                other: str | None) -> None:
    if first != other:
        raise exception.PciInvalidAlias(reason=(
            "%s mismatch for alias '%s': %s in one entry and %s in another;"
            " all entries with the same name must agree" % (
                what, name, _show(first), _show(other))))


def _check_identification(alias: PciAlias) -> None:
    """Refuse an alias Placement could not serve as written.

    Aliases are only scheduled through Placement here (``nova.pci.
    config`` refuses them otherwise), which picks a device by its
    resource class: one spec per alias, naming a class or the vendor and
    product ids that make one.
    """
    if len(alias.specs) > 1:
        raise exception.PciInvalidAlias(reason=(
            "alias '%s' has %d specs but PCI devices are scheduled through "
            "Placement, which supports one spec per alias; instead give the "
            "same resource_class to several [pci]device_spec entries and "
            "name that resource_class in a single alias entry" % (
                alias.name, len(alias.specs))))
    for spec in alias.specs:
        ids = [key for key in ('vendor_id', 'product_id') if key in spec]
        if ids and spec.get('resource_class'):
            # Upstream also filters hosts by the ids (PciPassthroughFilter
            # pool matching); here Placement alone picks the device, by
            # resource class, so the ids would be silently ignored and an
            # "h200" alias could hand out any device of that class.
            raise exception.PciInvalidAlias(reason=(
                "alias '%s' sets resource_class %r and %s; devices are "
                "chosen by resource class only in Placement, so %s would "
                "be ignored. Either drop resource_class (the class is then "
                "CUSTOM_PCI_<VENDOR>_<PRODUCT>) or drop %s and give the "
                "wanted devices their own resource_class in "
                "[pci]device_spec" % (
                    alias.name, spec['resource_class'],
                    ' and '.join('%s %r' % (k, spec[k]) for k in ids),
                    '/'.join(ids), '/'.join(ids))))
        if len(ids) < 2 and not spec.get('resource_class'):
            raise exception.PciInvalidAlias(reason=(
                "alias '%s' needs vendor_id and product_id, or "
                "resource_class; got spec %s" % (alias.name, spec)))


def get_alias_from_config(values: list[str]) -> dict[str, PciAlias]:
    """Parse ``[pci]alias`` values into aliases keyed by name.

    Entries sharing a name are merged into one alias whose specs are
    alternatives; they must agree on numa_policy, device_type and
    group_type, and the alias is then refused all the same (see
    _check_identification: Placement serves one spec per alias, as
    upstream with pci_in_placement). Raises PciInvalidAlias naming the
    offending value.
    """
    merged: dict[str, dict] = {}
    for value in values:
        name, spec, numa_policy, device_type, group_type = _parse_one(value)
        entry = merged.get(name)
        if entry is None:
            merged[name] = {'specs': [spec], 'numa_policy': numa_policy,
                            'device_type': device_type,
                            'group_type': group_type}
            continue
        _check_same(name, 'NUMA policy', entry['numa_policy'], numa_policy)
        _check_same(name, 'device_type', entry['device_type'], device_type)
        _check_same(name, 'group_type', entry['group_type'], group_type)
        entry['specs'].append(spec)

    aliases = {}
    for name, entry in merged.items():
        alias = PciAlias(name=name, specs=tuple(entry['specs']),
                         numa_policy=entry['numa_policy'],
                         device_type=entry['device_type'],
                         group_type=entry['group_type'])
        _check_identification(alias)
        aliases[name] = alias
    return aliases


def pci_resource_classes(aliases: dict[str, PciAlias],
                         whitelist: devspec.Whitelist) -> frozenset[str]:
    """Placement classes of PCI devices: those aliases request and those
    ``[pci]device_spec`` values (if set on this host) give devices.

    The flavor's own resources must not name them: only alias requests
    are mapped to devices by the compute.
    """
    classes = whitelist.resource_classes()
    for alias in aliases.values():
        classes.update(_spec_resource_class(spec) for spec in alias.specs)
    return frozenset(classes)


def parse_alias_extra_spec(value: str) -> list[tuple[str, int]]:
    """Parse ``pci_passthrough:alias`` into (alias name, count) pairs.

    The whole value must be ``name:count[,name:count...]`` with optional
    whitespace around names and counts; counts are positive integers.
    Raises PciInvalidFlavorRequest otherwise.
    """
    if not isinstance(value, str):
        raise exception.PciInvalidFlavorRequest(
            value=value, reason='not a string; ' + _EXPECTED_FORM)
    result = []
    for item in value.split(','):
        if not item.strip():
            raise exception.PciInvalidFlavorRequest(value=value, reason=(
                'empty item (stray or doubled comma?); ' + _EXPECTED_FORM))
        parts = item.split(':')
        if len(parts) != 2:
            raise exception.PciInvalidFlavorRequest(value=value, reason=(
                'item %r is not of the form name:count; %s' % (
                    item, _EXPECTED_FORM)))
        name, count = parts[0].strip(), parts[1].strip()
        if not name:
            raise exception.PciInvalidFlavorRequest(value=value, reason=(
                'item %r has no alias name; %s' % (item, _EXPECTED_FORM)))
        # isdecimal rather than int(): int() would also take '+2', '-1'
        # and '1_0'.
        if not (count.isascii() and count.isdecimal()) or int(count) < 1:
            raise exception.PciInvalidFlavorRequest(value=value, reason=(
                'count %r of alias %r is not a positive integer; %s' % (
                    count, name, _EXPECTED_FORM)))
        result.append((name, int(count)))
    return result


# The image property of the same meaning as EXTRA_SPEC_NUMA_POLICY.
IMAGE_PROP_NUMA_POLICY = 'hw_pci_numa_affinity_policy'


def _numa_policy(extra_specs: dict, alias: PciAlias,
                 image_properties: dict) -> str:
    policy = extra_specs.get(EXTRA_SPEC_NUMA_POLICY)
    image_policy = image_properties.get(IMAGE_PROP_NUMA_POLICY)
    if policy is not None and image_policy is not None and \
            image_policy != policy:
        # As upstream: an image may not change the flavor's policy.
        raise exception.ImagePCINUMAPolicyForbidden(
            image_policy=image_policy, flavor_policy=policy)
    if policy is None and image_policy is not None:
        if image_policy not in NUMA_POLICIES:
            raise exception.InvalidPCINUMAAffinity(
                message='Invalid PCI NUMA affinity policy %r in image '
                        'property %s; allowed values are %s' % (
                            image_policy, IMAGE_PROP_NUMA_POLICY,
                            ', '.join(NUMA_POLICIES)),
                policy=image_policy)
        return image_policy
    if policy is None:
        return alias.numa_policy
    if policy not in NUMA_POLICIES:
        raise exception.InvalidPCINUMAAffinity(
            policy=policy, allowed=', '.join(NUMA_POLICIES))
    return policy


def get_pci_requests_from_flavor(extra_specs: dict,
                                 aliases: dict[str, PciAlias],
                                 image_properties: dict | None = None
                                 ) -> list[InstancePCIRequest]:
    """Build the PCI requests a flavor's extra specs ask for.

    One request per ``name:count`` item, each with a fresh request id (the
    same alias listed twice gives two requests). The flavor's
    ``hw:pci_numa_affinity_policy``, else the image property
    ``hw_pci_numa_affinity_policy``, overrides the alias NUMA policy
    (InvalidPCINUMAAffinity when both are set and differ).
    Raises PciRequestAliasNotDefined for an unknown alias name.
    """
    value = extra_specs.get(EXTRA_SPEC_ALIAS)
    if value is None:
        return []
    requests = []
    for name, count in parse_alias_extra_spec(value):
        alias = aliases.get(name)
        if alias is None:
            defined = ', '.join(sorted(aliases)) or 'none'
            raise exception.PciRequestAliasNotDefined(
                message='PCI alias %r is not defined in [pci]alias; '
                        'defined aliases: %s' % (name, defined),
                alias=name)
        requests.append(InstancePCIRequest(
            request_id=str(uuid.uuid4()),
            alias_name=name,
            count=count,
            spec=copy.deepcopy(list(alias.specs)),
            numa_policy=_numa_policy(extra_specs, alias,
                                     image_properties or {}),
            group_type=alias.group_type,
            resource_class=alias.resource_class,
            traits=alias.traits))
    return requests


def requests_to_primitive(requests: list[InstancePCIRequest]) -> list[dict]:
    """JSON-ready form of PCI requests for ``instances.pci_requests``."""
    result = []
    for request in requests:
        value = dataclasses.asdict(request)
        value['traits'] = sorted(request.traits)
        result.append(value)
    return result


def requests_from_primitive(values: list[dict] | None
                            ) -> list[InstancePCIRequest]:
    """PCI requests from ``instances.pci_requests`` (None: no requests)."""
    return [InstancePCIRequest(
        **dict(value, traits=set(value.get('traits') or ())))
        for value in values or []]
