"""[pci] options: which host PCI devices nova manages, how they are grouped,
and the aliases flavors use to request them."""

from oslo_config import cfg

from nova.conf import groups

pci_group = cfg.OptGroup(
    'pci', title='PCI passthrough options',
    help='Options describing the PCI devices nova may pass through to '
         'instances, the groups they form and the aliases flavors request.')

pci_opts = [
    cfg.MultiStrOpt('device_spec',
                    default=[],
                    deprecated_opts=[
                        cfg.DeprecatedOpt('passthrough_whitelist',
                                          group='pci'),
                        cfg.DeprecatedOpt('pci_passthrough_whitelist',
                                          group='DEFAULT')],
                    help="""
Host PCI devices nova may assign to instances (nova-compute).

Each value is a JSON object, or a JSON list of objects, selecting devices:

* ``vendor_id``, ``product_id``: 4-digit hex IDs; absent means any.
* ``address``: a glob string ``[[[domain:]bus:]slot][.function]`` where an
  empty field or ``*`` means any, or a dict of regular expressions with keys
  ``domain``, ``bus``, ``slot`` and ``function``. Exclusive with ``devname``.
* ``devname``: a network interface name (not allowed with
  ``report_in_placement``).
* ``resource_class``: the Placement resource class of the devices (default
  ``CUSTOM_PCI_<VENDOR>_<PRODUCT>``).
* ``traits``: comma-separated Placement traits for the devices.
* ``managed``: ``true`` (default) lets libvirt detach the device from its host
  driver; ``false`` means it is pre-bound to vfio-pci.
* ``live_migratable``: ``true`` adds trait ``HW_PCI_LIVE_MIGRATABLE``.
* ``one_time_use``: trait ``HW_PCI_ONE_TIME_USE``; once used the device's
  inventory stays reserved in Placement until an operator clears it
  (needs ``report_in_placement``; refused on VFs).
* ``physical_network``: Neutron SR-IOV devices; not reported, so not
  assignable here. ``trusted``: kept as a tag only.
* ``remote_managed``: ``true`` selects only VFs for which libvirt reports a
  VPD card serial number; refused on a PF address (unless ``product_id`` is
  its VF product id) and with a ``devname`` that does not exist. Such
  devices are tracked but not given to flavor aliases, as upstream.
  See the operator guide's table of upstream options.
* ``group_name`` + ``group_type``: the static group form; all devices with
  the same ``group_name`` form one unit of ``CUSTOM_PCI_GROUP_<TYPE>``,
  always assigned whole.

Any other key is a tag matched against alias specs, unless it looks like a
misspelling of a key above (same name ignoring case, ``_``, ``-`` and spaces,
or within 1 edit, 2 for names over 9 letters, e.g. ``vendorid``, ``adress``):
that is refused so a typo cannot silently widen the spec. The first matching
value wins. Example::

  device_spec = {"vendor_id": "10de", "product_id": "2335",
                 "resource_class": "PGPU"}
"""),
    cfg.MultiStrOpt('device_group',
                    default=[],
                    help="""
Groups of PCI devices that are only useful together, for example GPUs joined
by an NVLink partition (nova-compute).

Each value is one JSON object:

* ``name``: unique name of the group on this host.
* ``type``: the kind of group, e.g. ``nvlink``; aliases select it with
  ``group_type``.
* ``addresses``: the PCI addresses of the devices in the group, or
* ``members``: names of smaller groups of the same type that make up this
  group.

The groups form a tree whose sizes are derived from it (a pair is 2, a quad
of two pairs is 4). A request for N devices of an alias with ``group_type``
gets exactly the devices of one free group of size N. Example (HGX H200;
the addresses are illustrative: NVLink partitions follow GPU module IDs,
not PCI order, so take the groups from ``fmpm -l`` and ``nvidia-smi -q``
or use ``device_group_source = fabric_manager``)::

  device_group = {"name": "pair-a1", "type": "nvlink",
                  "addresses": ["0000:3a:00.0", "0000:5d:00.0"]}
  device_group = {"name": "quad-a", "type": "nvlink",
                  "members": ["pair-a1", "pair-a2"]}

Requires ``report_in_placement``.
"""),
    cfg.MultiStrOpt('alias',
                    default=[],
                    deprecated_opts=[cfg.DeprecatedOpt('pci_alias',
                                                       group='DEFAULT')],
                    help="""
Names for kinds of PCI devices, used in the flavor extra spec
``pci_passthrough:alias=<name>:<count>`` (nova-api, nova-scheduler,
nova-conductor and nova-compute).

Each value is one JSON object with the keys ``name`` (required),
``vendor_id``, ``product_id``, ``device_type`` (``type-PCI``, ``type-PF``,
``type-VF``), ``numa_policy`` (``legacy``, ``preferred``, ``required``,
``socket``; see the operator guide on PCI NUMA affinity), ``resource_class``,
``traits``, ``live_migratable`` and ``group_type``. With ``group_type``, a
request of N devices is always served by one whole device group of that
type and of size N (N = 1 means any single device). Several values with
the same name are read as one alias with several specs, which is refused,
as upstream refuses it with ``pci_in_placement``: Placement serves one
spec per alias. To let one alias match several kinds of device, give them
the same ``resource_class`` in several ``[pci]device_spec`` entries and
name that class in a single alias entry. An alias names either
``resource_class`` or ``vendor_id``/``product_id``, not both: Placement
chooses devices by resource class only, so the ids would be ignored.
Aliases need ``[filter_scheduler]pci_in_placement`` (API, scheduler,
conductor) and ``report_in_placement`` (computes); services refuse to start
otherwise. Example::

  alias = {"name": "h200", "resource_class": "PGPU", "group_type": "nvlink"}
"""),
    cfg.StrOpt('device_group_source',
               default='config',
               choices=[
                   ('config', 'groups are declared in [pci]device_group'),
                   ('fabric_manager', 'groups are the NVLink partitions '
                    'Fabric Manager lists')],
               help="""
Where nova-compute gets its device groups. ``config``: from
``[pci]device_group``; when ``[libvirt]nvlink_partitions = fabric_manager``
every declared multi-device group must be exactly one Fabric Manager
partition, else the compute refuses to start. ``fabric_manager``: the
compute builds the ``nvlink`` group tree itself from Fabric Manager's
partitions and the GPU module map (pairs inside quads inside the board, by
containment), so the operator writes only device_spec and alias;
``[pci]device_group`` must then be empty. Requires
``[libvirt]nvlink_partitions = fabric_manager``.
"""),
    cfg.BoolOpt('report_in_placement',
                default=False,
                help='Report the PCI devices selected by device_spec, and '
                     'their groups, to Placement as resource providers '
                     'under the compute node (nova-compute). Once enabled '
                     'on a compute it cannot be disabled again.'),
    cfg.IntOpt('partition_quarantine_failures',
               default=1, min=1,
               help="""
How many activations of one NVLink partition in a row must fail for a
hardware reason (Fabric Manager's NVLINK_ERROR) before nova-compute
quarantines it: its GPUs are then not offered until the periodic repair
re-probes it successfully or the broken GPU or NVSwitch is healthy again.
Every failed build is rescheduled at once either way. Transient Fabric
Manager errors (timeouts, not running, still initializing) never count.
Used with ``[libvirt]nvlink_partitions = fabric_manager``.
"""),
    cfg.StrOpt('unhealthy_device_action',
               default='none',
               choices=[
                   ('none', 'record an instance action event and a fault '
                    'on the server; leave it running'),
                   ('stop', 'also stop the server (it keeps its devices '
                    'and allocation, as any stopped server)')],
               help="""
What nova-compute does to a server holding a PCI device that becomes
unhealthy (observed broken, or marked by ``nova-manage pci device set
--unhealthy``). Either way the server gets an instance action event and a
fault naming the device, and the device does not return to service when
the server is deleted.
"""),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    groups.register_group_opts(conf, pci_group, pci_opts)


def list_opts() -> dict:
    return {pci_group: pci_opts}
