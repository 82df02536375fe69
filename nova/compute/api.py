"""The compute API behind the REST API: create, read, delete servers and
run server actions (reboot, stop, start, rebuild, shelve, unshelve).

``create`` checks everything that can be checked without a host (the
flavor, its PCI aliases and extra specs, the image in Glance) so that
a bad request is an HTTP 400 naming the bad value, not a server in
ERROR. It then records the
instance and hands the build to nova-conductor.
"""

import dataclasses
import secrets
import string

from oslo_config import cfg
from oslo_log import log as logging
import oslo_messaging
from oslo_utils import timeutils

from nova.compute import instance_actions
from nova.compute import quota
from nova.compute import rpcapi as compute_rpcapi
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova.conductor import migrate
from nova.conductor import rpcapi as conductor_rpcapi
from nova.db import api as db
from nova.db import records
from nova import exception
from nova.image import glance
from nova.pci import config as pci_config
from nova.pci import request as pci_request
from nova.scheduler.client import report
from nova.scheduler import request_builder
from nova.servicegroup import api as servicegroup
from nova.virt import driver as virt_driver
from nova.virt import guest_hardware

LOG = logging.getLogger(__name__)

GiB = 1024 ** 3
# Image properties a snapshot does not take from the server's image, as
# upstream: Glance's own (reserved), the uploader's checksums and
# signature of the original data.
_NOT_INHERITED = ('os_glance', 'owner_specified.', 'img_signature')

# Task states of a move in flight: a delete waits for the move to settle.
MOVE_TASK_STATES = (task_states.RESIZE_PREP, task_states.RESIZE_MIGRATING,
                    task_states.RESIZE_MIGRATED, task_states.RESIZE_FINISH,
                    task_states.RESIZE_REVERTING, task_states.REBUILDING)


def check_image_for_flavor(image: glance.ImageMeta,
                           flavor: records.FlavorSnapshot) -> None:
    """Refuse (400) an image a server of ``flavor`` cannot boot from, as
    upstream: larger than the flavor's disk, or asking for more disk
    (``min_disk``) or memory (``min_ram``) than the flavor has. A flavor
    disk of 0 takes the image's own size."""
    root_gb = flavor.root_gb
    if root_gb and root_gb * GiB < image.disk_bytes:
        raise exception.FlavorDiskSmallerThanImage(
            flavor_gb=root_gb, image_ref=image.id,
            image_bytes=image.disk_bytes)
    if root_gb and root_gb < image.min_disk:
        raise exception.FlavorDiskSmallerThanMinDisk(
            flavor_gb=root_gb, image_ref=image.id, min_disk=image.min_disk)
    if flavor.memory_mb < image.min_ram:
        raise exception.FlavorMemoryTooSmall(
            flavor_mb=flavor.memory_mb, image_ref=image.id,
            min_ram=image.min_ram)


def check_lock(context, instance: records.Instance) -> None:
    """InstanceIsLocked (409) when a non-admin acts on a locked server,
    as upstream: admins act on locked servers."""
    if instance.locked and not context.is_admin:
        raise exception.InstanceIsLocked(instance_uuid=instance.uuid)


@dataclasses.dataclass(frozen=True)
class ServerFields:
    """What a user says of a new server besides its name, flavor, image
    and metadata: kept with it and shown by the API."""

    description: str | None = None
    access_ip_v4: str | None = None
    access_ip_v6: str | None = None
    # Base64, as the API takes it.
    user_data: str | None = None
    # The caller's key pair whose public key the server keeps.
    key_name: str | None = None
    # The server group (UUID) the server joins (the ``group`` scheduler
    # hint), checked by the caller.
    server_group: str | None = None


# The characters of a reservation id after its 'r-'.
_RESERVATION_CHARS = string.ascii_lowercase + string.digits


def _times(usage: dict[str, int], count: int) -> dict[str, int]:
    """The quota usage of ``count`` servers of one server's ``usage``."""
    return {resource: amount * count for resource, amount in usage.items()}


class API:
    """Server lifecycle entry points used by ``nova.api.servers``."""

    def __init__(self, conf: cfg.ConfigOpts,
                 reportclient: report.SchedulerReportClient | None = None
                 ) -> None:
        self.conf = conf
        # Parsed once: a bad [pci]alias stops nova-api at start.
        pci = pci_config.load(conf)
        self.aliases = pci.aliases
        self.pci_resource_classes = pci.resource_classes
        self.reportclient = reportclient or report.SchedulerReportClient(
            conf)
        self.conductor_api = conductor_rpcapi.ConductorAPI(conf)
        self.compute_rpcapi = compute_rpcapi.ComputeAPI(conf)
        # Built on first use: a deployment whose servers have no image
        # needs no [glance].
        self._glance: glance.GlanceClient | None = None

    @property
    def glance_client(self) -> glance.GlanceClient:
        """The Glance client (``[glance]``), built on first use."""
        if self._glance is None:
            self._glance = glance.GlanceClient(self.conf)
        return self._glance

    def image(self, image_ref: str, flavor: records.FlavorSnapshot
              ) -> glance.ImageMeta | None:
        """The Glance image ``image_ref`` a server of ``flavor`` boots
        from, checked (400 naming the image and the reason: missing or
        deleted, not active, a format a guest cannot boot, too big or
        asking for more than the flavor has); None for no image (empty
        or ``none``). ImageServiceUnavailable (503) when Glance cannot
        be reached."""
        if image_ref in ('', compute_utils.NO_IMAGE):
            return None
        try:
            image = self.glance_client.show(image_ref)
        except exception.ImageNotFound as err:
            raise exception.APIValidationError(
                field='imageRef', reason=err.message) from err
        image.check_bootable()
        guest_hardware.check_image_properties(image.properties)
        check_image_for_flavor(image, flavor)
        return image

    def _flavor(self, context, flavor_ref: str) -> records.Flavor:
        """The flavor a server boots or resizes to. A private flavor is
        an admin's only: with no access lists kept, no project has been
        given it, and upstream answers such a project as if the flavor
        did not exist."""
        try:
            flavor = db.flavor_get_by_flavorid(context, flavor_ref)
            if not flavor.is_public and not context.is_admin:
                raise exception.FlavorNotFound(flavor_id=flavor_ref)
        except exception.FlavorNotFound:
            raise exception.APIValidationError(
                field='flavorRef',
                reason='flavor %r does not exist' % (flavor_ref,))
        if flavor.disabled:
            raise exception.APIValidationError(
                field='flavorRef',
                reason='flavor %r is disabled' % (flavor_ref,))
        return flavor

    def create(self, context, name: str, flavor_ref: str, image_ref: str,
               metadata: dict, fields: 'ServerFields | None' = None,
               min_count: int = 1,
               max_count: int = 1) -> list[records.Instance]:
        """Record new instances and start building them; return them.

        ``max_count`` servers are made if the quota allows, else
        ``min_count`` (upstream's multiple create); with more than one,
        each is named ``<name>-<n>``, n from 1, and all join the server
        group of ``fields``.

        Raises (HTTP 400) APIValidationError for an unknown or disabled
        flavor, PciRequestAliasNotDefined / PciInvalidFlavorRequest /
        InvalidPCINUMAAffinity for a bad ``pci_passthrough:alias`` and
        FlavorExtraSpecInvalid for other bad extra specs, and the
        errors of :meth:`image` for ``image_ref`` (a Glance image id;
        ``none`` or empty: no image). The instance keeps the image's
        metadata (its properties shape the guest). ``metadata`` (key ->
        string) is stored with the server, and so are ``fields``, with
        the public key of their key pair (400 if the caller has no key
        pair of that name).
        """
        fields = fields or ServerFields()
        flavor = self._flavor(context, flavor_ref).snapshot()
        image = self.image(image_ref, flavor)
        pci_requests = pci_request.get_pci_requests_from_flavor(
            flavor.extra_specs, self.aliases,
            image_properties=image.properties if image else None)
        # The remaining extra specs the scheduler and compute will use.
        request_builder.check_extra_specs(flavor.extra_specs,
                                          self.pci_resource_classes)
        guest_hardware.check_flavor(
            flavor, image.properties if image else None)
        keypair = self._key_pair(context, fields.key_name)
        quota.check_metadata(context, self.conf, context.project_id,
                             metadata or {})
        values = {
            'display_name': name,
            'project_id': context.project_id,
            'user_id': context.user_id,
            'flavor_id': flavor.id,
            'flavor': flavor,
            'vm_state': vm_states.BUILDING,
            'task_state': task_states.SCHEDULING,
            'power_state': virt_driver.NOSTATE,
            'pci_requests': pci_requests,
            'image_ref': image.id if image else image_ref,
            'image_meta': image.to_primitive() if image else None,
            'server_metadata': dict(metadata or {}),
            'key_name': keypair.name if keypair else None,
            'key_data': keypair.public_key if keypair else None,
            'description': fields.description,
            'access_ip_v4': fields.access_ip_v4,
            'access_ip_v6': fields.access_ip_v6,
            'user_data': fields.user_data,
        }
        # One reservation for the servers of this create, as upstream
        # names them.
        values['reservation_id'] = 'r-' + ''.join(
            secrets.choice(_RESERVATION_CHARS) for _ in range(8))
        names = [name] if max_count == 1 else [
            '%s-%d' % (name, n) for n in range(1, max_count + 1)]
        usage = quota.flavor_usage(flavor, pci_requests)
        # Counted and recorded under the project's quota lock: concurrent
        # creates never exceed a limit (403 naming it, nothing created).
        # As many as the quota allows, from max_count down to min_count.
        for count in range(max_count, min_count - 1, -1):
            try:
                instances = quota.reserve(
                    context, self.conf, _times(usage, count),
                    lambda: self._record(context, fields, values,
                                         names[:count]))
                break
            except exception.TooManyInstances:
                if count == min_count:
                    raise
        return [self._build(context, instance, flavor, image_ref)
                for instance in instances]

    def _build(self, context, instance: records.Instance,
               flavor: records.FlavorSnapshot,
               image_ref: str) -> records.Instance:
        """Hand a recorded instance to the conductor; the instance (in
        ERROR with the fault when the conductor could not be told)."""
        instance_actions.start(context, instance.uuid,
                               instance_actions.CREATE)
        LOG.info('Instance %s (%s) created with flavor %s and image %r',
                 instance.uuid, instance.display_name, flavor.flavorid,
                 image_ref)
        try:
            self.conductor_api.build_instance(context, instance.uuid)
        except oslo_messaging.MessagingException as exc:
            LOG.error('Could not hand instance %s to nova-conductor: %s',
                      instance.uuid, exc)
            instance = db.instance_update(context, instance.uuid, {
                'vm_state': vm_states.ERROR, 'task_state': None,
                'fault_message': 'The build could not be handed to '
                                 'nova-conductor: %s' % exc})
        return instance

    @staticmethod
    def _record(context, fields: ServerFields, values: dict,
                names: list[str]) -> list[records.Instance]:
        """Create one instance with ``values`` per name, each a member of
        the server group if ``fields`` names one: all or none (one
        transaction); 400 if the group was deleted since the caller
        checked it."""
        instances = []
        try:
            with db.context_manager.writer.using(context):
                for name in names:
                    instance = db.instance_create(
                        context, dict(values, display_name=name))
                    if fields.server_group is not None:
                        db.instance_group_member_add(
                            context, fields.server_group, instance.uuid)
                    instances.append(instance)
        except exception.InstanceGroupNotFound as exc:
            raise exception.APIValidationError(
                field='os:scheduler_hints/group', reason=exc.message)
        return instances

    @staticmethod
    def _key_pair(context, key_name: str | None) -> records.KeyPair | None:
        """The caller's key pair ``key_name``; 400 naming it if the
        caller has none of that name."""
        if key_name is None:
            return None
        try:
            return db.key_pair_get(context, context.user_id, key_name)
        except exception.KeypairNotFound:
            raise exception.APIValidationError(
                field='key_name',
                reason='Invalid key_name provided: %r is not a key pair of '
                       'user %s' % (key_name, context.user_id)) from None

    def get(self, context, uuid: str) -> records.Instance:
        """The instance; InstanceNotFound (404) if missing or deleted."""
        return db.instance_get_by_uuid(context, uuid)

    def get_all(self, context, detail: bool = True) -> list[records.Instance]:
        """Every instance that is not deleted (the REST layer scopes them
        to the caller's project); ``detail`` changes nothing here."""
        return db.instance_get_all(context)

    # Moves (started, confirmed and reverted by nova.conductor.migrate,
    # which the conductor's automatic defragmentation shares) ------------

    def update_metadata_item(self, context, instance: records.Instance,
                             key: str,
                             value: str | None) -> dict:
        """Set (or with ``value`` None, remove) one metadata item of
        the server; its metadata afterwards. MetadataItemNotFound when
        removing a key it does not have."""
        metadata = dict(instance.server_metadata or {})
        if value is not None:
            metadata[key] = value
            return self.set_metadata(context, instance, metadata)
        if key not in metadata:
            raise exception.MetadataItemNotFound(key=key)
        del metadata[key]
        db.instance_update(context, instance.uuid,
                           {'server_metadata': metadata})
        return metadata

    def set_metadata(self, context, instance: records.Instance,
                     metadata: dict[str, str]) -> dict[str, str]:
        """Make ``metadata`` all of the server's metadata, in one write;
        MetadataLimitExceeded (403) when it has more items than the
        project's ``metadata_items`` limit."""
        quota.check_metadata(context, self.conf, instance.project_id,
                             metadata)
        db.instance_update(context, instance.uuid,
                           {'server_metadata': metadata})
        return metadata

    def resize(self, context, instance: records.Instance,
               flavor_ref: str) -> records.Migration:
        """Resize the server to flavor ``flavor_ref``; the migration.

        The new flavor is checked as for a boot (400 naming a bad alias or
        extra spec, or one the server's image properties conflict with);
        resizing to the flavor the server has is refused, as
        upstream does.
        """
        flavor = self._flavor(context, flavor_ref).snapshot()
        if instance.flavor is not None and \
                flavor.flavorid == instance.flavor.flavorid:
            raise exception.APIValidationError(
                field='flavorRef', reason='the server already has flavor '
                '%r; a resize must change the flavor' % (flavor_ref,))
        pci_requests = pci_request.get_pci_requests_from_flavor(
            flavor.extra_specs, self.aliases)
        request_builder.check_extra_specs(flavor.extra_specs,
                                          self.pci_resource_classes)
        # The server's image keeps its say (hw_mem_page_size).
        root_disk = compute_utils.root_disk(instance, flavor)
        guest_hardware.check_flavor(
            flavor, root_disk.properties if root_disk else None)
        self._check_resize_quota(context, instance, flavor, pci_requests)
        return migrate.start(
            context, self.conductor_api, instance, 'resize',
            new_flavor=flavor, new_pci_requests=pci_requests)

    def _check_resize_quota(
            self, context, instance: records.Instance,
            flavor: records.FlavorSnapshot,
            pci_requests: list[pci_request.InstancePCIRequest]) -> None:
        """TooManyInstances (403) if the server's growth to ``flavor``
        (more cores, RAM or devices of an alias) would exceed a limit of
        its project or user, as upstream checks a resize."""
        old = quota.flavor_usage(instance.flavor, instance.pci_requests)
        new = quota.flavor_usage(flavor, pci_requests)
        deltas = {resource: amount - old.get(resource, 0)
                  for resource, amount in new.items()
                  if resource != quota.INSTANCES}
        with db.quota_locked(context, instance.project_id):
            quota.check(context, self.conf, instance.project_id,
                        instance.user_id, deltas)

    def migrate(self, context, instance: records.Instance,
                host: str | None = None) -> records.Migration:
        """Cold-migrate the server to another host (``host`` if given);
        the migration. The flavor and PCI requests stay."""
        if host is not None:
            if self._compute_service(context, host) is None:
                raise exception.APIValidationError(
                    field='host', reason='no compute service runs on host '
                    '%r' % (host,))
            if host == instance.host:
                raise exception.APIValidationError(
                    field='host', reason='the server already runs on %r; '
                    'a cold migration must change the host' % (host,))
        return migrate.start(context, self.conductor_api, instance,
                             'migration', host=host)

    def evacuate(self, context, instance: records.Instance,
                 host: str | None = None,
                 stopped: bool = False) -> records.Migration:
        """Rebuild the server on another host (``host`` if given) because
        its compute is down; the migration. ``stopped`` (microversion
        2.95 on, as upstream) leaves it SHUTOFF there whatever its state;
        otherwise it keeps its state (ACTIVE or SHUTOFF). The server is
        recorded stopped at once: its host is down, so its guest does
        not run, and a failed evacuation leaves it SHUTOFF where it was.

        400 (ComputeServiceInUse) while the source compute is up: an
        evacuation must never run a second guest of the server. The
        flavor and PCI requests stay: a partition of the same size.
        """
        source = instance.host
        service = self._compute_service(context, source)
        if servicegroup.is_up(service, self.conf):
            raise exception.ComputeServiceInUse(
                host=source, reason='it reported within '
                '[DEFAULT]service_down_time')
        if host is not None:
            target = self._compute_service(context, host)
            if target is None:
                raise exception.APIValidationError(
                    field='host', reason='no compute service runs on host '
                    '%r' % (host,))
            if host == source:
                raise exception.APIValidationError(
                    field='host', reason='%r is the host the server is '
                    'evacuated from' % (host,))
            if not servicegroup.is_up(target, self.conf):
                raise exception.ComputeServiceUnavailable(host=host)
        return migrate.start(
            context, self.conductor_api, instance, 'evacuation', host=host,
            values=dict(compute_utils.SETTLED_STOPPED) if stopped
            else None)

    @staticmethod
    def _compute_service(context,
                         host: str | None) -> records.Service | None:
        try:
            return db.service_get_by_host_and_binary(
                context, host, compute_rpcapi.BINARY)
        except exception.ServiceHostBinaryNotFound:
            return None

    def confirm_resize(self, context, instance: records.Instance,
                       wait: bool = False) -> None:
        """Confirm the resize or cold migration of a VERIFY_RESIZE server:
        its source is freed. ``wait`` returns only when it is done."""
        migrate.confirm(context, self.conductor_api, instance, wait=wait)

    def revert_resize(self, context, instance: records.Instance) -> None:
        """Revert the resize or cold migration of a VERIFY_RESIZE server:
        it runs again where it was, with its old flavor and devices."""
        migrate.revert(context, self.conductor_api, instance)

    def delete(self, context, uuid: str) -> None:
        """Delete the instance and free everything it holds.

        The task state is set to ``deleting`` first, in one statement that
        also returns the host: the conductor only records a host while the
        task state is still ``scheduling``, so either the host is known now
        (the compute there tears the instance down: guest, devices,
        allocation, record) or it never will be and the allocation the
        scheduler may have claimed is freed here.

        If the compute of that host is down (no heartbeat for
        ``[DEFAULT]service_down_time``) or does not answer, the instance is
        deleted here as for a host-less one, as upstream Nova does; the
        compute destroys the guest and frees the devices when it comes
        back (``nova.compute.repair.release_unowned``).
        """
        instance = self._mark_deleting(context, uuid)
        instance_actions.start(context, uuid, instance_actions.DELETE)
        host = instance.host
        if host and self._terminate_on_host(context, host, uuid):
            return
        self._local_delete(context, uuid, host)

    def _mark_deleting(self, context, uuid: str) -> records.Instance:
        """Set task state ``deleting`` unless a move step is in flight
        (409: the move must settle first); a server in VERIFY_RESIZE is
        confirmed first, as upstream does, so its source is freed too.

        Each try is a compare-and-swap on the task state just read, so a
        move starting meanwhile is never overtaken; a build moving on
        (scheduling -> spawning) only makes it read again.
        """
        while True:
            instance = db.instance_get_by_uuid(context, uuid)
            if instance.task_state in MOVE_TASK_STATES:
                raise exception.InstanceInvalidState(
                    action='delete', instance_uuid=uuid, attr='task_state',
                    state=instance.task_state,
                    allowed='no resize or migration step in progress '
                            '(wait for VERIFY_RESIZE, ACTIVE or ERROR)')
            if instance.vm_state == vm_states.RESIZED:
                self.confirm_resize(context, instance, wait=True)
                continue
            try:
                return db.instance_update(
                    context, uuid, {'task_state': task_states.DELETING},
                    expected={'task_state': instance.task_state,
                              'vm_state': instance.vm_state})
            except exception.InstanceUpdateConflict:
                continue

    def _terminate_on_host(self, context, host: str, uuid: str) -> bool:
        """Have the compute of ``host`` delete the instance; False if it
        is down or does not answer, so the caller deletes locally."""
        service = self._compute_service(context, host)
        if not servicegroup.is_up(service, self.conf):
            LOG.warning('Deleting instance %s without its compute: %s',
                        uuid, servicegroup.down_reason(service, host))
            return False
        try:
            self.compute_rpcapi.terminate_instance(context, host, uuid)
        except oslo_messaging.MessagingTimeout as exc:
            # Down since its last heartbeat. A compute that is only slow
            # and finishes later does no harm: every step is idempotent.
            LOG.warning('Compute %s did not answer the delete of instance '
                        '%s (%s); deleting it without its compute', host,
                        uuid, exc)
            return False
        return True

    def _local_delete(self, context, uuid: str, host: str | None) -> None:
        """Free the allocation and delete the record, without a compute
        (a free Placement does not answer is left pending for ``host``'s
        compute, see ``nova.scheduler.frees``)."""
        compute_utils.free_and_destroy(context, self.reportclient, uuid,
                                       host)
        LOG.info('Instance %s deleted without a compute', uuid)

    # Server actions ---------------------------------------------------------

    def lock(self, context, instance: records.Instance,
             reason: str | None) -> None:
        """Lock the server, by its owner or an admin, with ``reason``
        (2.73); locking a locked server changes nothing, as upstream."""
        if instance.locked:
            return
        db.instance_update(context, instance.uuid, {
            'locked': True,
            'locked_by': 'admin' if context.is_admin else 'owner',
            'locked_reason': reason})
        instance_actions.start(context, instance.uuid,
                               instance_actions.LOCK)

    def unlock(self, context, instance: records.Instance) -> None:
        """Unlock the server (whoever may, see the API's policies)."""
        db.instance_update(context, instance.uuid, {
            'locked': False, 'locked_by': None, 'locked_reason': None})
        instance_actions.start(context, instance.uuid,
                               instance_actions.UNLOCK)

    def reset_state(self, context, instance: records.Instance,
                    vm_state: str) -> None:
        """Set the server's vm_state (active or error) and clear its
        task, as an admin does to a server stuck in a task; nothing on
        its host is touched."""
        db.instance_update(context, instance.uuid, {
            'vm_state': vm_state, 'task_state': None})

    def _accept(self, context, uuid: str, action: str, task_state: str,
                vm_state: list[str], task_state_in: list | None = None,
                values: dict | None = None) -> records.Instance:
        """Accept ``action`` if the server is in one of ``vm_state`` with a
        task state in ``task_state_in`` (default: none): set
        ``task_state`` (and ``values``) in the same statement (so of
        concurrent actions one wins), record the action and return the
        instance. InstanceInvalidState (409, upstream's wording)
        otherwise.
        """
        try:
            instance = db.instance_update(
                context, uuid, dict(values or {}, task_state=task_state),
                expected={'vm_state': vm_state,
                          'task_state': task_state_in or [None]})
        except exception.InstanceUpdateConflict as exc:
            raise exception.InstanceInvalidState(
                action=action, instance_uuid=uuid,
                attr=exc.kwargs['field'], state=exc.kwargs['actual'])
        instance_actions.start(context, uuid, action)
        return instance

    def _check_state(self, context, uuid: str, action: str,
                     vm_state: list[str]) -> records.Instance:
        """The instance, if ``action`` may run on it now (one of
        ``vm_state``, no task); InstanceInvalidState (409) otherwise. A
        look before talking to Glance, as upstream refuses a server in
        the wrong state first; :meth:`_accept` checks again atomically."""
        instance = self.get(context, uuid)
        for attr, state, allowed in (
                ('vm_state', instance.vm_state, vm_state),
                ('task_state', instance.task_state, [None])):
            if state not in allowed:
                raise exception.InstanceInvalidState(
                    action=action, instance_uuid=uuid, attr=attr,
                    state=state)
        return instance

    def snapshot(self, context, uuid: str, name: str,
                 metadata: dict[str, str] | None = None) -> str:
        """createImage: a new Glance image ``name`` of an ACTIVE or
        SHUTOFF server's root disk; its id. The image is created
        (queued) here and its data uploaded by the compute; it inherits
        the properties of the server's image, plus ``metadata``, as
        upstream. A server without an image has no disk to snapshot
        (400)."""
        def send(instance: records.Instance, image_id: str) -> None:
            self.compute_rpcapi.snapshot_instance(
                context, instance.host, uuid, image_id)
        return self._image_of(context, uuid, name, metadata,
                              {'image_type': 'snapshot'},
                              instance_actions.CREATE_IMAGE,
                              task_states.IMAGE_SNAPSHOT, send)

    def backup(self, context, uuid: str, name: str, backup_type: str,
               rotation: int, metadata: dict[str, str] | None = None) -> str:
        """createBackup: a snapshot (as :meth:`snapshot`) marked as a
        backup of ``backup_type``, after which the compute keeps only
        the newest ``rotation`` backups of that type; the image's id."""
        def send(instance: records.Instance, image_id: str) -> None:
            self.compute_rpcapi.backup_instance(
                context, instance.host, uuid, image_id, backup_type,
                rotation)
        return self._image_of(context, uuid, name, metadata,
                              {'image_type': 'backup',
                               'backup_type': backup_type},
                              instance_actions.CREATE_BACKUP,
                              task_states.IMAGE_BACKUP, send)

    def _image_of(self, context, uuid: str, name: str,
                  metadata: dict[str, str] | None, marks: dict[str, str],
                  action: str, task_state: str, send) -> str:
        """Create the queued image of an ACTIVE or SHUTOFF server's root
        disk, with the base image's properties, ``metadata`` and
        ``marks``; accept ``action`` with ``task_state`` and ``send``
        the upload to the compute. Nothing is left if either fails."""
        allowed = [vm_states.ACTIVE, vm_states.STOPPED]
        instance = self._check_state(context, uuid, action, allowed)
        meta = instance.image_meta
        if not meta:
            raise exception.Invalid(reason=(
                'server %s has no root disk to snapshot: it was created '
                'without an image' % uuid))
        base = glance.ImageMeta.from_primitive(meta)
        properties = {key: value for key, value in base.properties.items()
                      if not key.startswith(_NOT_INHERITED)}
        properties.update(metadata or {})
        properties.update(marks, instance_uuid=uuid, base_image_ref=base.id)
        # The server's project owns the image, as when upstream creates
        # it with the user's token; nova's service user creates it here.
        image = self.glance_client.create(
            name, properties=properties, min_ram=base.min_ram,
            min_disk=max(base.min_disk,
                         instance.flavor.root_gb if instance.flavor else 0),
            owner=instance.project_id)
        try:
            instance = self._accept(context, uuid, action, task_state,
                                    allowed)
        except Exception:
            self.glance_client.delete(image.id)
            raise
        try:
            send(instance, image.id)
        except Exception:
            # Not sent (an RPC cap below the method's version, messaging
            # down): the server is left as it was, and so is Glance.
            db.instance_update(context, uuid, {'task_state': None},
                               expected={'task_state': task_state})
            self.glance_client.delete(image.id)
            raise
        return image.id

    def reboot(self, context, uuid: str, hard: bool) -> None:
        """Soft reboot an ACTIVE server; hard reboot an ACTIVE or SHUTOFF
        one (also while a soft reboot runs), as upstream."""
        if hard:
            instance = self._accept(
                context, uuid, instance_actions.REBOOT,
                task_states.REBOOTING_HARD,
                [vm_states.ACTIVE, vm_states.STOPPED],
                [None, task_states.REBOOTING])
        else:
            instance = self._accept(context, uuid, instance_actions.REBOOT,
                                    task_states.REBOOTING,
                                    [vm_states.ACTIVE])
        self.compute_rpcapi.reboot_instance(context, instance.host, uuid,
                                            hard)

    def stop(self, context, uuid: str) -> None:
        """Power an ACTIVE server off (SHUTOFF, devices kept)."""
        instance = self._accept(context, uuid, instance_actions.STOP,
                                task_states.POWERING_OFF, [vm_states.ACTIVE])
        self.compute_rpcapi.stop_instance(context, instance.host, uuid)

    def start(self, context, uuid: str) -> None:
        """Power a SHUTOFF server on."""
        instance = self._accept(context, uuid, instance_actions.START,
                                task_states.POWERING_ON,
                                [vm_states.STOPPED])
        self.compute_rpcapi.start_instance(context, instance.host, uuid)

    def rebuild(self, context, uuid: str, name: str | None = None,
                image_ref: str | None = None,
                values: dict | None = None) -> records.Instance:
        """Rebuild an ACTIVE or SHUTOFF server on its devices from
        ``image_ref`` (its root disk made again), renamed to ``name`` if
        given, with the other columns of ``values`` (metadata,
        description, access addresses, user data; ``key_name`` is the
        caller's key pair, or None for none); return it.

        Everything is written with the task state, before the compute is
        told: the guest it redefines carries them. The image is checked
        as :meth:`create` checks it.
        """
        values = dict(values or {})
        if 'server_metadata' in values:
            quota.check_metadata(context, self.conf, context.project_id,
                                 values['server_metadata'] or {})
        if 'key_name' in values:
            keypair = self._key_pair(context, values['key_name'])
            values['key_data'] = keypair.public_key if keypair else None
        allowed = [vm_states.ACTIVE, vm_states.STOPPED]
        if name is not None:
            values['display_name'] = name
        if image_ref is not None:
            current = self._check_state(context, uuid,
                                        instance_actions.REBUILD, allowed)
            image = self.image(image_ref, current.flavor)
            values['image_ref'] = image.id if image else image_ref
            values['image_meta'] = image.to_primitive() if image else None
        instance = self._accept(context, uuid, instance_actions.REBUILD,
                                task_states.REBUILDING, allowed,
                                values=values)
        self.compute_rpcapi.rebuild_instance(context, instance.host, uuid)
        return instance

    def update(self, context, instance: records.Instance,
               values: dict) -> records.Instance:
        """Change what the user says of a server (``display_name``,
        ``description``, access addresses) in any state; a locked server
        refuses its project's members."""
        check_lock(context, instance)
        return db.instance_update(context, instance.uuid, values)

    def get_console_output(self, context, instance: records.Instance,
                           tail_length: int | None) -> str:
        """The server's console log (its last ``tail_length`` lines), read
        by its compute; InstanceNotReady (409) while it is on no host
        (being scheduled, shelved offloaded), as upstream."""
        if not instance.host:
            raise exception.InstanceNotReady(
                instance_uuid=instance.uuid,
                reason='it is %s and on no compute host' %
                       instance.vm_state)
        return self.compute_rpcapi.get_console_output(
            context, instance.host, instance.uuid, tail_length)

    def shelve(self, context, uuid: str) -> None:
        """Shelve an ACTIVE or SHUTOFF server."""
        instance = self._accept(context, uuid, instance_actions.SHELVE,
                                task_states.SHELVING,
                                [vm_states.ACTIVE, vm_states.STOPPED])
        self.compute_rpcapi.shelve_instance(context, instance.host, uuid)

    def shelve_offload(self, context, uuid: str) -> None:
        """Offload a SHELVED server from its host."""
        instance = self._accept(context, uuid,
                                instance_actions.SHELVE_OFFLOAD,
                                task_states.SHELVING_OFFLOADING,
                                [vm_states.SHELVED])
        self.compute_rpcapi.shelve_offload_instance(context,
                                                    instance.host, uuid)

    def unshelve(self, context, uuid: str) -> None:
        """Unshelve: a SHELVED server powers on where it is, an offloaded
        one is scheduled again by the conductor."""
        # An offloaded server is handed to the conductors as a build is
        # (see nova.conductor.manager): unowned, stamped now, so another
        # conductor takes it over if this hand-over is lost.
        instance = self._accept(
            context, uuid, instance_actions.UNSHELVE,
            task_states.UNSHELVING,
            [vm_states.SHELVED, vm_states.SHELVED_OFFLOADED],
            values={'build_owner': None,
                    'build_heartbeat': timeutils.utcnow(),
                    'fault_message': None, 'fault_details': None})
        if instance.vm_state == vm_states.SHELVED:
            self.compute_rpcapi.unshelve_instance(context, instance.host,
                                                  uuid)
        else:
            self.conductor_api.unshelve_instance(context, uuid)
