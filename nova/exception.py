"""Nova's exception hierarchy.

Every exception carries a formatted message naming the bad value and, where
it helps, what is allowed. API code maps ``Invalid`` to HTTP 400,
``NotFound`` to 404 and ``Conflict`` to 409.

Messages are nova's own words, except where clients and operators match
upstream's text: "No valid host was found", the "... could not be found"
API errors, the refused server action (InstanceInvalidState) and the
missing instance action (InstanceActionNotFound) keep upstream's wording.
"""

from collections.abc import Iterable

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class NovaException(Exception):
    """Base class; subclasses set ``msg_fmt`` and are raised with kwargs."""

    msg_fmt = 'Unexpected error in nova.'
    code = 500

    def __init__(self, message: str | None = None, **kwargs):
        self.kwargs = kwargs
        if message is None:
            message = self._format(kwargs)
        self.message = message
        super().__init__(message)

    def _format(self, kwargs: dict) -> str:
        """``msg_fmt`` filled in with ``kwargs``. A raise site whose
        kwargs do not fit the template still raises this exception (not
        a KeyError from formatting it): the error is logged and the
        message is the template followed by the kwargs."""
        try:
            return self.msg_fmt % kwargs
        except (KeyError, TypeError, ValueError) as err:
            LOG.error('%s could not format its message %r with %r: %s',
                      type(self).__name__, self.msg_fmt, kwargs, err)
            return '%s (%s)' % (self.msg_fmt, ', '.join(
                '%r: %r' % item for item in sorted(kwargs.items())))


def reason_of(exc: BaseException) -> str:
    """What went wrong, for a fault message or a log line: a nova
    exception's formatted message, or any other exception's text."""
    return getattr(exc, 'message', None) or str(exc)


class Invalid(NovaException):
    msg_fmt = 'Bad request: %(reason)s'
    code = 400


class NotFound(NovaException):
    msg_fmt = 'The requested resource does not exist.'
    code = 404


class Conflict(NovaException):
    msg_fmt = 'Conflict: %(reason)s'
    code = 409


class InvalidConfiguration(Invalid):
    msg_fmt = 'Invalid configuration: %(reason)s'


class ListenFailed(Invalid):
    """A service could not bind its address: the port is taken (or the
    address is not this host's); ``options`` name where it is set."""
    msg_fmt = ('%(service)s cannot listen on %(address)s%(options)s: '
               '%(reason)s')


# PCI configuration -------------------------------------------------------

class PciConfigInvalidSpec(Invalid):
    msg_fmt = '[pci]device_spec is not valid: %(reason)s'


class PciDeviceWrongAddressFormat(PciConfigInvalidSpec):
    msg_fmt = ('PCI address %(address)s is not valid; the form is '
               '[domain:]bus:slot.function in hex, e.g. 0000:1b:00.0.')


class PciDeviceInvalidDeviceName(PciConfigInvalidSpec):
    msg_fmt = ('Invalid PCI device spec: it can specify devname or '
               'address, but not both.')


class PciInvalidAlias(Invalid):
    msg_fmt = 'Invalid PCI alias definition in [pci]alias: %(reason)s'


class PciRequestAliasNotDefined(NotFound):
    msg_fmt = 'PCI alias %(alias)s is not in [pci]alias'
    code = 400


class PciInvalidFlavorRequest(Invalid):
    msg_fmt = ('Invalid pci_passthrough:alias extra spec %(value)r: '
               '%(reason)s')


class PciGroupConfigInvalid(Invalid):
    msg_fmt = 'Invalid [pci]device_group config: %(reason)s'


# PCI tracking and Placement ----------------------------------------------

class PlacementPciException(Invalid):
    """The ``[pci]`` configuration describes devices Placement cannot be
    given (or no longer take): an operator's error, which stops a
    starting compute with one line like any other bad configuration."""
    msg_fmt = 'PCI devices could not be reported to Placement: %(error)s'


class PciDeviceRequestFailed(NovaException):
    msg_fmt = 'PCI devices for %(requests)s could not be claimed'


class PciDeviceUnhealthy(PciDeviceRequestFailed):
    """A claim named devices that are unhealthy (``kwargs['addresses']``),
    e.g. marked by an operator after Placement offered them."""


# Placement client ---------------------------------------------------------

class PlacementAPIConnectFailure(NovaException):
    msg_fmt = 'Unable to reach the Placement service at %(url)s: %(error)s'


class PlacementAPIError(NovaException):
    msg_fmt = ('Placement %(method)s %(url)s failed with HTTP %(status)s: '
               '%(detail)s')


class ResourceProviderUpdateConflict(Conflict):
    msg_fmt = ('Resource provider %(uuid)s changed concurrently '
               '(generation %(generation)s) and retries were exhausted: '
               '%(error)s')


# Hypervisor ---------------------------------------------------------------

class HypervisorUnavailable(NovaException):
    msg_fmt = 'Connection to the hypervisor %(uri)s failed: %(error)s'


# PCI device groups --------------------------------------------------------

class PciDeviceGroupNotFound(NotFound):
    msg_fmt = ('PCI device group %(name)s is not declared in '
               '[pci]device_group; declared groups: %(known)s')


class PciDeviceNotInGroup(NotFound):
    msg_fmt = 'PCI device %(address)s is not in device group %(name)s'


class InvalidPCINUMAAffinity(Invalid):
    msg_fmt = ('Invalid PCI NUMA affinity policy %(policy)r in '
               'hw:pci_numa_affinity_policy; allowed values are %(allowed)s')


class ImagePCINUMAPolicyForbidden(Invalid):
    msg_fmt = ("Image property 'hw_pci_numa_affinity_policy' "
               "%(image_policy)r may not override the flavor's "
               "hw:pci_numa_affinity_policy %(flavor_policy)r")


class PciNumaAffinityViolation(Invalid):
    msg_fmt = ('PCI request %(label)s with NUMA affinity policy '
               '%(policy)s cannot be met: %(reason)s')


# Compute driver -----------------------------------------------------------

class HugepagesUnavailable(NovaException):
    msg_fmt = ('Not enough free hugepages on this host for %(memory_mb)d '
               'MiB in %(cells)d NUMA cell(s): %(reason)s')


class GuestHardwareUnsupported(NovaException):
    msg_fmt = 'The guest cannot work as defined: %(reason)s'


class InstanceSpawnFailed(NovaException):
    msg_fmt = 'Failed to spawn instance %(uuid)s on %(uri)s: %(error)s'


class InstancePowerActionFailed(NovaException):
    msg_fmt = 'Could not %(action)s instance %(uuid)s on %(uri)s: %(error)s'


class InstanceDestroyFailed(NovaException):
    msg_fmt = 'Failed to destroy instance %(uuid)s on %(uri)s: %(error)s'


class ImageNotFound(NotFound):
    msg_fmt = 'Image %(image_id)s could not be found.'


class ImageNotActive(Invalid):
    msg_fmt = ('Image %(image_id)s is not active (its status is '
               '%(status)s); only an active image can be used')


class ImageServiceUnavailable(NovaException):
    msg_fmt = ('The image service (Glance) at %(url)s could not be '
               'reached: %(error)s')
    code = 503


class ImageServiceError(NovaException):
    msg_fmt = ('The image service (Glance) answered %(method)s %(url)s '
               'with %(status)s: %(detail)s')
    code = 502


class ImageDownloadFailed(NovaException):
    msg_fmt = 'Image %(image_id)s could not be downloaded: %(reason)s'


class FlavorDiskSmallerThanMinDisk(Invalid):
    msg_fmt = ("The flavor's disk (%(flavor_gb)d GB) is smaller than the "
               "minimum disk of image %(image_ref)s (min_disk "
               "%(min_disk)d GB)")


class FlavorMemoryTooSmall(Invalid):
    msg_fmt = ("The flavor's memory (%(flavor_mb)d MB) is smaller than the "
               "minimum memory of image %(image_ref)s (min_ram "
               "%(min_ram)d MB)")


class ImageUnacceptable(Invalid):
    msg_fmt = 'Image %(image_ref)r cannot be used: %(reason)s'


class FlavorDiskSmallerThanImage(Invalid):
    msg_fmt = ("The flavor's disk (%(flavor_gb)d GB) is smaller than the "
               'image %(image_ref)r (%(image_bytes)d bytes); use a flavor '
               'whose disk is at least as large, or disk 0')


class ConsoleOutputNotSupported(NovaException):
    msg_fmt = ('The hypervisor driver of %(host)s keeps no console log of '
               'its guests')
    code = 501


class HypervisorUptimeNotSupported(NovaException):
    msg_fmt = 'Virt driver does not implement uptime function.'
    code = 501


class InstanceNotReady(Conflict):
    msg_fmt = 'Instance %(instance_uuid)s is not ready: %(reason)s'


# NVIDIA Fabric Manager ----------------------------------------------------

class FabricManagerError(NovaException):
    """An ``fmpm`` call failed; subclasses name FM's return code."""

    msg_fmt = 'Fabric Manager %(operation)s failed: %(error)s'


class FabricManagerBadParam(FabricManagerError):
    msg_fmt = ('Fabric Manager %(operation)s failed: bad or unsupported '
               'partition ID (%(error)s)')


class FabricManagerInUse(FabricManagerError):
    msg_fmt = ('Fabric Manager %(operation)s failed: the partition is '
               'already active or shares a GPU with an active partition '
               '(%(error)s)')


class FabricManagerNotActive(FabricManagerError):
    msg_fmt = ('Fabric Manager %(operation)s failed: the partition is not '
               'active (%(error)s)')


class FabricManagerNotConfigured(FabricManagerError):
    msg_fmt = ('Fabric Manager %(operation)s failed: Fabric Manager is '
               'still initializing or waits for its restart list '
               '(%(error)s)')


class FabricManagerNotSupported(FabricManagerError):
    msg_fmt = ('Fabric Manager %(operation)s failed: not supported; is '
               'FABRIC_MODE=1 (shared NVSwitch)? (%(error)s)')


class FabricManagerConnectionInvalid(FabricManagerError):
    msg_fmt = ('Fabric Manager %(operation)s failed: cannot connect to '
               'Fabric Manager (%(error)s)')


class FabricManagerTimeout(FabricManagerError):
    msg_fmt = 'Fabric Manager %(operation)s timed out: %(error)s'


class FabricManagerNVLinkError(FabricManagerError):
    msg_fmt = ('Fabric Manager %(operation)s failed: NVLink training '
               'failed (%(error)s)')


class NVLinkPartitionFailed(NovaException):
    msg_fmt = ('NVLink partition %(partition)s for instance %(uuid)s: '
               '%(error)s')


# Scheduler ----------------------------------------------------------------

class FlavorExtraSpecInvalid(Invalid):
    msg_fmt = 'Invalid flavor extra spec %(key)s=%(value)r: %(reason)s'


# Compute API ----------------------------------------------------------------

class PolicyNotAuthorized(NovaException):
    msg_fmt = 'Policy rule %(action)s does not allow this caller.'
    code = 403


class APIValidationError(Invalid):
    msg_fmt = 'Invalid input for field %(field)s: %(reason)s'


class InvalidKeypair(Invalid):
    msg_fmt = 'Keypair data is invalid: %(reason)s'


class RequestBodyTooLarge(NovaException):
    msg_fmt = ('The request body (%(size)s bytes) is larger than the limit '
               'of %(limit)d bytes ([api]max_request_body_size).')
    code = 413


class InvalidAPIVersionString(Invalid):
    msg_fmt = ('API version string %(version)r is not of the form '
               'MAJOR.MINOR (e.g. 2.60) or "latest".')


class APIVersionNotSupported(NovaException):
    msg_fmt = ('API version %(version)s is not served; this API serves '
               '%(min_version)s to %(max_version)s.')
    code = 406


# Database ------------------------------------------------------------------

class DBFieldInvalid(Invalid):
    msg_fmt = ('Unknown %(table)s field(s) %(fields)s; allowed: '
               '%(allowed)s')


class ServiceNotFound(NotFound):
    msg_fmt = 'Service %(service_id)s could not be found.'


class ServiceHostBinaryNotFound(ServiceNotFound):
    msg_fmt = 'Service %(binary)s on host %(host)s could not be found.'


class ServiceExists(Conflict):
    msg_fmt = 'Service %(binary)s already exists on host %(host)s.'


class ComputeHostNotFound(NotFound):
    msg_fmt = 'Compute node %(node)s could not be found.'


class ComputeNodeExists(Conflict):
    msg_fmt = 'Compute node %(node)s (uuid %(uuid)s) already exists.'


class PciDeviceNotFoundById(NotFound):
    msg_fmt = 'PCI device with id %(id)s could not be found.'


class PciDeviceNotFound(NotFound):
    msg_fmt = ('PCI device %(address)s is not tracked on compute node '
               '%(compute_node_id)s.')


class PciDeviceExists(Conflict):
    msg_fmt = ('PCI device %(address)s already exists on compute node '
               '%(compute_node_id)s.')


class FlavorNotFound(NotFound):
    msg_fmt = 'Flavor %(flavor_id)s could not be found.'


class FlavorExists(Conflict):
    msg_fmt = 'A flavor with %(field)s %(value)s already exists.'


class FlavorExtraSpecNotFound(NotFound):
    msg_fmt = 'Flavor %(flavor_id)s has no extra spec %(key)s.'


class KeypairNotFound(NotFound):
    msg_fmt = 'Keypair %(name)s not found for user %(user_id)s'


class KeyPairExists(Conflict):
    msg_fmt = "Key pair '%(key_name)s' already exists."


class InstanceNotFound(NotFound):
    msg_fmt = 'Instance %(instance_id)s could not be found.'


class InstanceGroupNotFound(NotFound):
    msg_fmt = 'Instance group %(group_uuid)s could not be found.'


class InstanceExists(Conflict):
    msg_fmt = 'Instance %(uuid)s already exists.'


class InstanceUpdateConflict(Conflict):
    msg_fmt = ('Instance %(uuid)s has %(field)s %(actual)r, expected one '
               'of %(expected)r.')


class InstanceIsLocked(Conflict):
    # Upstream's wording.
    msg_fmt = 'Instance %(instance_uuid)s is locked'


class InstanceInvalidState(Conflict):
    # Upstream's wording for a server action refused in this state; an
    # optional ``allowed`` adds the state the action needs.
    msg_fmt = ("Cannot '%(action)s' instance %(instance_uuid)s while it is "
               "in %(attr)s %(state)s")

    def __init__(self, message: str | None = None, **kwargs):
        if message is None and kwargs.get('allowed'):
            message = '%s; allowed: %s' % (self.msg_fmt % kwargs,
                                           kwargs['allowed'])
        super().__init__(message, **kwargs)


class MetadataItemNotFound(NotFound):
    msg_fmt = 'The server has no metadata item %(key)r.'


class InstanceActionNotFound(NotFound):
    msg_fmt = ('Action for request_id %(request_id)s on instance '
               '%(instance_uuid)s not found')


class InstanceActionEventNotFound(NotFound):
    msg_fmt = 'Instance action event %(event_id)s could not be found.'


class InventoryInUse(Conflict):
    msg_fmt = ('Inventory of resource provider %(uuid)s is in use and '
               'cannot be removed or shrunk below its usage: %(error)s')


# Boot path ------------------------------------------------------------------

class NoValidHost(NovaException):
    """Nothing fits a request. ``kwargs['codes']`` are its causes for
    programs (``nova.scheduler.refusal`` codes, sorted, each once; empty
    when the raiser names none), next to ``reason`` for people. Being
    kwargs, they cross RPC: oslo.messaging sends an exception's args and
    kwargs and rebuilds it from them in the caller."""

    msg_fmt = ('No valid host was found. There are not enough hosts '
               'available: %(reason)s')

    def __init__(self, message: str | None = None,
                 codes: Iterable[str] = (), **kwargs) -> None:
        super().__init__(message, codes=sorted(set(codes)), **kwargs)


class BuildLeaseLost(NovaException):
    msg_fmt = ('Build of instance %(instance_uuid)s is no longer driven by '
               '%(owner)s: %(reason)s')


class RescheduledException(NovaException):
    msg_fmt = ('Instance %(instance_uuid)s was not built on this host and '
               'may be tried on another: %(reason)s')


class BuildAbortException(NovaException):
    msg_fmt = ('Build of instance %(instance_uuid)s aborted: %(reason)s; '
               'every host would refuse it the same way')


class MigrationNotFound(NotFound):
    msg_fmt = 'Migration %(migration_id)s could not be found.'


class MigrationExists(Conflict):
    msg_fmt = 'Migration %(uuid)s already exists.'


class MigrationUpdateConflict(Conflict):
    msg_fmt = ('Migration %(uuid)s has status %(actual)r, expected '
               '%(expected)r.')


class ComputeServiceUnavailable(NovaException):
    msg_fmt = ('The compute service of %(host)s is down; retry once it '
               'reports up again.')
    code = 409


class ComputeServiceInUse(Invalid):
    msg_fmt = ('Compute service of %(host)s is still up: %(reason)s; '
               'only instances of a host whose compute service is down '
               'can be evacuated.')


class RPCVersionCapped(NovaException):
    msg_fmt = ('%(method)s needs nova-%(service)s RPC API %(version)s, but '
               '[upgrade_levels]%(service)s caps messages to '
               'nova-%(service)s at %(cap)s; raise or unset the cap once '
               'every nova-%(service)s serves %(version)s.')
    code = 409


class MigrationFailed(NovaException):
    msg_fmt = 'Migration of instance %(instance_uuid)s failed: %(reason)s'


class MetadataLimitExceeded(NovaException):
    """More metadata items on one server than the project's
    ``metadata_items`` limit (HTTP 403), in upstream's words."""

    msg_fmt = 'Maximum number of metadata items exceeds %(allowed)d'
    code = 403


class TooManyInstances(NovaException):
    """Over quota (HTTP 403), in upstream's words: ``overs`` names the
    resources, ``req``/``used``/``allowed`` their numbers (each a
    comma-separated list in the order of ``overs``)."""

    msg_fmt = ('Quota exceeded for %(overs)s: Requested %(req)s, but '
               'already used %(used)s of %(allowed)s %(overs)s')
    code = 403


class QuotaLimitOutOfRange(Invalid):
    """A new quota limit below what is in use (or above the project's
    limit, for a user's), in upstream's words."""

    msg_fmt = 'Quota limit %(limit)s for %(resource)s must be %(bound)s.'
