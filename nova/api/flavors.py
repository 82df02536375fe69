"""Flavors and flavor extra specs (``/flavors``, ``/os-extra_specs``).

Flavors are read and written straight through nova.db.api. Writes are
admin-only by policy. Extra specs that nova itself interprets are checked
when they are set, so a bad flavor fails at ``openstack flavor set`` time
instead of at every server boot: ``pci_passthrough:alias`` must parse and
name aliases defined in ``[pci]alias``, and ``resources:``, ``trait:`` and
``group_policy`` must pass the same check as at server create
(``request_builder.check_extra_specs``).
"""

import re
from collections.abc import Sequence

from nova.api import validation
from nova.api import version_history
from nova.db import api as db
from nova.db import records
from nova import exception
from nova.pci import config as pci_config
from nova.pci import request as pci_request
from nova import policies
from nova.scheduler import request_builder
from nova.virt import guest_hardware
from nova.virt import hugepages

# The keys this fork acts on in the namespaces it shares with upstream:
# any other key there (upstream's hw:cpu_policy, hw:numa_cpus.N, ...)
# would be stored and silently ignored, so it is refused.
_KNOWN_KEYS = {
    'pci_passthrough:': (pci_request.EXTRA_SPEC_ALIAS,),
    'hw:': (guest_hardware.FIRMWARE_TYPE_SPEC,
            guest_hardware.MACHINE_TYPE_SPEC,
            hugepages.MEM_PAGE_SIZE_SPEC,
            guest_hardware.NUMA_NODES_SPEC,
            pci_request.EXTRA_SPEC_NUMA_POLICY),
}
_SPEC_KEY_RE = re.compile(r'^[\w.\-: ]{1,255}$')

# Flavor fields the database does not store: accepted only at their
# default value so a client is never silently ignored.
_FIXED_FIELDS = {'OS-FLV-EXT-DATA:ephemeral': 0, 'swap': 0,
                 'rxtx_factor': 1.0}

_CREATE_SCHEMA = {
    'type': 'object',
    'properties': {
        'name': {'type': 'string', 'minLength': 1, 'maxLength': 255,
                 'pattern': r'^\S(.*\S)?$'},
        # A number too, as upstream (clients send integer ids); the
        # string rules apply to strings only.
        'id': {'type': ['string', 'number', 'null'], 'minLength': 1,
               'maxLength': 255, 'pattern': r'^[\w.\- ]+$'},
        'ram': validation.positive_integer(),
        'vcpus': validation.positive_integer(),
        'disk': validation.non_negative_integer(),
        'OS-FLV-EXT-DATA:ephemeral': validation.non_negative_integer(),
        'swap': {'anyOf': [validation.non_negative_integer(),
                           {'enum': ['']}]},
        'rxtx_factor': {'type': ['number', 'string']},
        'os-flavor-access:is_public': validation.BOOLEAN,
        'description': {'type': ['string', 'null'], 'maxLength': 65535},
    },
    'required': ['name', 'ram', 'vcpus', 'disk'],
    'additionalProperties': False,
}


def _admin_list(req) -> bool:
    return req.policy.allowed(req.context, policies.FLAVOR_CREATE)


def _links(req, flavorid: str) -> list[dict]:
    return [{'rel': 'self', 'href': req.link('flavors', flavorid)},
            {'rel': 'bookmark',
             'href': req.link('flavors', flavorid, versioned=False)}]


def _brief_view(req, flavor: records.Flavor) -> dict:
    view = {'id': flavor.flavorid, 'name': flavor.name,
            'links': _links(req, flavor.flavorid)}
    if req.api_version.at_least(version_history.FLAVOR_DESCRIPTION):
        view['description'] = None
    return view


def _detail_view(req, flavor: records.Flavor) -> dict:
    view = _brief_view(req, flavor)
    view.update({
        'ram': flavor.memory_mb,
        'vcpus': flavor.vcpus,
        'disk': flavor.root_gb,
        'OS-FLV-EXT-DATA:ephemeral': 0,
        # Before 2.75 an unset swap is rendered as an empty string.
        'swap': (0 if req.api_version.at_least(version_history.SWAP_ZERO)
                 else ''),
        'rxtx_factor': 1.0,
        'os-flavor-access:is_public': flavor.is_public,
        'OS-FLV-DISABLED:disabled': flavor.disabled,
    })
    if (req.api_version.at_least(version_history.FLAVOR_EXTRA_SPECS_SHOWN)
            and req.policy.allowed(req.context,
                                   policies.EXTRA_SPECS_INDEX)):
        view['extra_specs'] = dict(flavor.extra_specs)
    return view


def _is_public_filter(req) -> bool | None:
    """Which flavors a listing shows: public only, unless an admin asks
    for ``is_public=false`` or ``is_public=none`` (all)."""
    value = req.GET.get('is_public')
    if value is None or not _admin_list(req):
        return True
    value = value.strip().lower()
    if value == 'none':
        return None
    return validation.boolean('is_public', value)


def _filtered(req) -> Sequence[records.Flavor]:
    """Flavors of a listing, after is_public, minRam, minDisk, marker and
    limit, in flavorid order."""
    flavors = db.flavor_get_all(req.context,
                                is_public=_is_public_filter(req))
    min_ram = validation.query_int(req, 'minRam')
    min_disk = validation.query_int(req, 'minDisk')
    flavors = [f for f in flavors
               if (min_ram is None or f.memory_mb >= min_ram)
               and (min_disk is None or f.root_gb >= min_disk)]
    flavors.sort(key=lambda f: f.flavorid)
    return validation.paginate(req, flavors,
                               lambda flavor: flavor.flavorid)


def index(req) -> tuple:
    """GET /flavors: id, name and links of each flavor."""
    req.policy.authorize(req.context, policies.FLAVORS)
    return 200, {'flavors': [_brief_view(req, f) for f in _filtered(req)]}


def detail(req) -> tuple:
    """GET /flavors/detail: full flavor views."""
    req.policy.authorize(req.context, policies.FLAVORS)
    return 200, {'flavors': [_detail_view(req, f) for f in _filtered(req)]}


def show(req, flavor_id: str) -> tuple:
    """GET /flavors/{id}."""
    req.policy.authorize(req.context, policies.FLAVORS)
    flavor = db.flavor_get_by_flavorid(req.context, flavor_id)
    return 200, {'flavor': _detail_view(req, flavor)}


def _check_fixed_fields(body: dict) -> None:
    for field, default in _FIXED_FIELDS.items():
        value = body.get(field, default)
        if value in ('', None):
            continue
        try:
            same = float(value) == float(default)
        except ValueError:
            same = False
        if not same:
            raise exception.APIValidationError(
                field=field, reason='%r is not supported; this deployment '
                'only stores %r' % (value, default))
    if body.get('description') is not None:
        raise exception.APIValidationError(
            field='description',
            reason='flavor descriptions are not stored by this deployment')


def _flavor_id(value: str | int | float) -> str:
    """The stored id of a flavor created with ``id``: a string as given
    (stripped), or a number's decimal form (``7`` and ``7.0`` are "7")."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def create(req) -> tuple:
    """POST /flavors (admin): create a flavor, a uuid id unless given."""
    req.policy.authorize(req.context, policies.FLAVOR_CREATE)
    body = req.body_object('flavor')
    validation.validate(body, _CREATE_SCHEMA)
    _check_fixed_fields(body)
    values = {'name': body['name'],
              'memory_mb': int(body['ram']),
              'vcpus': int(body['vcpus']),
              'root_gb': int(body['disk']),
              'is_public': validation.as_bool(
                  body.get('os-flavor-access:is_public', True))}
    if body.get('id') is not None:
        values['flavorid'] = _flavor_id(body['id'])
    flavor = db.flavor_create(req.context, values)
    return 200, {'flavor': _detail_view(req, flavor)}


def delete(req, flavor_id: str) -> tuple:
    """DELETE /flavors/{id} (admin)."""
    req.policy.authorize(req.context, policies.FLAVOR_DELETE)
    db.flavor_destroy(req.context, flavor_id)
    return 202, None


# Extra specs ---------------------------------------------------------------

def _check_pci_alias(aliases: dict, value: str) -> None:
    """Syntax of pci_passthrough:alias, and that each alias is defined."""
    defined = ', '.join(sorted(aliases)) or 'none'
    key = pci_request.EXTRA_SPEC_ALIAS
    try:
        requested = pci_request.parse_alias_extra_spec(value)
    except exception.PciInvalidFlavorRequest as exc:
        raise exception.FlavorExtraSpecInvalid(
            key=key, value=value, reason='%s; aliases defined in '
            '[pci]alias: %s' % (exc.kwargs['reason'], defined))
    unknown = sorted({name for name, _count in requested
                      if name not in aliases})
    if unknown:
        raise exception.FlavorExtraSpecInvalid(
            key=key, value=value, reason='alias %s not defined in '
            '[pci]alias; aliases defined: %s' % (
                ', '.join(repr(n) for n in unknown), defined))


def _check_known(key: str, value: str) -> None:
    """Refuse a key of a shared namespace that nothing here acts on."""
    for namespace, known in _KNOWN_KEYS.items():
        if key.startswith(namespace) and key not in known:
            raise exception.FlavorExtraSpecInvalid(
                key=key, value=value, reason='unknown or unsupported key '
                'in the %s namespace (this service would ignore it); '
                'supported keys: %s' % (namespace, ', '.join(known)))


def _check_specs(conf, specs: dict) -> dict[str, str]:
    """Validate extra specs and return them with string values."""
    pci = pci_config.load(conf)
    checked = {}
    for key, value in specs.items():
        if not _SPEC_KEY_RE.match(key):
            raise exception.APIValidationError(
                field='extra_specs', reason='key %r must be 1-255 '
                'letters, digits, spaces or "_.-:"' % key)
        if isinstance(value, bool) or not isinstance(
                value, (str, int, float)):
            raise exception.APIValidationError(
                field='extra_specs', reason='value of %r must be a string '
                'or a number, got %r' % (key, value))
        value = str(value)
        if len(value) > 255:
            raise exception.APIValidationError(
                field='extra_specs', reason='value of %r is longer than '
                '255 characters' % key)
        _check_known(key, value)
        if key == pci_request.EXTRA_SPEC_ALIAS:
            _check_pci_alias(pci.aliases, value)
        if (key == pci_request.EXTRA_SPEC_NUMA_POLICY
                and value not in pci_request.NUMA_POLICIES):
            raise exception.InvalidPCINUMAAffinity(
                policy=value, allowed=', '.join(pci_request.NUMA_POLICIES))
        checked[key] = value
    request_builder.check_extra_specs(checked, pci.resource_classes)
    guest_hardware.check_extra_specs(checked)
    return checked


def _check_flavor_specs(context, flavor_id: str, specs: dict) -> None:
    """Refuse specs the flavor's size cannot take (``hw:numa_nodes`` must
    split its vCPUs and memory evenly); a missing flavor is a 404."""
    flavor = db.flavor_get_by_flavorid(context, flavor_id)
    guest_hardware.check_flavor(
        flavor.snapshot(dict(flavor.extra_specs, **specs)))


def specs_index(req, flavor_id: str) -> tuple:
    """GET /flavors/{id}/os-extra_specs."""
    req.policy.authorize(req.context, policies.EXTRA_SPECS_INDEX)
    return 200, {'extra_specs': db.flavor_extra_specs_get(req.context,
                                                          flavor_id)}


def specs_create(req, flavor_id: str) -> tuple:
    """POST /flavors/{id}/os-extra_specs (admin): add or change specs."""
    req.policy.authorize(req.context, policies.EXTRA_SPECS_CREATE)
    specs = _check_specs(req.conf, req.body_object('extra_specs'))
    _check_flavor_specs(req.context, flavor_id, specs)
    db.flavor_extra_specs_update_or_create(req.context, flavor_id, specs)
    return 200, {'extra_specs': specs}


def specs_show(req, flavor_id: str, key: str) -> tuple:
    """GET /flavors/{id}/os-extra_specs/{key}."""
    req.policy.authorize(req.context, policies.EXTRA_SPECS_SHOW)
    specs = db.flavor_extra_specs_get(req.context, flavor_id)
    if key not in specs:
        raise exception.FlavorExtraSpecNotFound(flavor_id=flavor_id,
                                                key=key)
    return 200, {key: specs[key]}


def specs_update(req, flavor_id: str, key: str) -> tuple:
    """PUT /flavors/{id}/os-extra_specs/{key} (admin): body ``{key: v}``."""
    req.policy.authorize(req.context, policies.EXTRA_SPECS_UPDATE)
    body = req.body_object()
    if len(body) != 1:
        raise exception.APIValidationError(
            field='body', reason='expected exactly one item {%r: value}, '
            'got %d' % (key, len(body)))
    if key not in body:
        raise exception.APIValidationError(
            field='body', reason='key %r does not match the URL key %r' % (
                next(iter(body)), key))
    specs = _check_specs(req.conf, body)
    _check_flavor_specs(req.context, flavor_id, specs)
    db.flavor_extra_specs_update_or_create(req.context, flavor_id, specs)
    return 200, specs


def specs_delete(req, flavor_id: str, key: str) -> tuple:
    """DELETE /flavors/{id}/os-extra_specs/{key} (admin)."""
    req.policy.authorize(req.context, policies.EXTRA_SPECS_DELETE)
    db.flavor_extra_specs_delete(req.context, flavor_id, key)
    return 200, None
