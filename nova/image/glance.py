"""A typed client of the image service (Glance's v2 API).

Services reach Glance through keystoneauth1 with the ``[glance]``
options (service catalog, or ``endpoint_override``/``api_servers``), as
upstream. Every error becomes a nova exception with a message naming the
image and the reason: ImageNotFound (404), ImageServiceUnavailable (Glance
cannot be reached, 503) and ImageServiceError (any other answer), so a
REST request never ends in a 500 because of Glance.

A download streams the image into a temporary file beside its target,
checks its hash against the one Glance recorded and only then renames it
to the target: a download cut short never leaves a file a reader could
take for the image.
"""

import dataclasses
import hashlib
import os
import uuid

from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg
from oslo_log import log as logging
import requests

from nova import exception
from nova.conf import ksa

LOG = logging.getLogger(__name__)

CONF_GROUP = 'glance'
# Bytes read from Glance per write while downloading.
CHUNK_SIZE = 1024 * 1024
# Disk formats a guest's root disk may be made from (a qcow2 overlay is
# backed by the image, see nova.virt.libvirt.imagebackend).
BOOTABLE_DISK_FORMATS = ('raw', 'qcow2')
# The media type of Glance's v2 image updates (a JSON patch).
PATCH_MEDIA_TYPE = 'application/openstack-images-v2.1-json-patch'
# Glance's statuses of an image whose data can be read.
ACTIVE = 'active'
# The image fields that are not properties (Glance's schema).
_BASE_FIELDS = frozenset((
    'id', 'name', 'status', 'disk_format', 'container_format', 'size',
    'virtual_size', 'min_disk', 'min_ram', 'checksum', 'os_hash_algo',
    'os_hash_value', 'owner', 'visibility', 'protected', 'os_hidden',
    'tags', 'created_at', 'updated_at', 'file', 'schema', 'self',
    'locations', 'direct_url', 'stores'))


@dataclasses.dataclass(frozen=True)
class ImageMeta:
    """What nova uses of a Glance image. ``properties`` are its other
    attributes (``hw_machine_type`` and the like), as strings."""
    id: str
    name: str
    status: str
    disk_format: str | None = None
    container_format: str | None = None
    size: int | None = None
    virtual_size: int | None = None
    min_disk: int = 0
    min_ram: int = 0
    properties: dict[str, str] = dataclasses.field(default_factory=dict)
    checksum: str | None = None
    os_hash_algo: str | None = None
    os_hash_value: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    owner: str | None = None

    @classmethod
    def from_glance(cls, body: dict) -> 'ImageMeta':
        """The image of a Glance v2 image body."""
        return cls(
            id=body['id'], name=body.get('name') or '',
            status=body.get('status') or '',
            disk_format=body.get('disk_format'),
            container_format=body.get('container_format'),
            size=body.get('size'),
            virtual_size=body.get('virtual_size'),
            min_disk=int(body.get('min_disk') or 0),
            min_ram=int(body.get('min_ram') or 0),
            properties={k: str(v) for k, v in body.items()
                        if k not in _BASE_FIELDS and v is not None},
            checksum=body.get('checksum'),
            os_hash_algo=body.get('os_hash_algo'),
            os_hash_value=body.get('os_hash_value'),
            created_at=body.get('created_at'),
            updated_at=body.get('updated_at'),
            owner=body.get('owner'))

    def to_primitive(self) -> dict:
        """A JSON-ready copy (what an instance keeps of its image)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_primitive(cls, value: dict) -> 'ImageMeta':
        """The image :meth:`to_primitive` wrote."""
        return cls(**value)

    @property
    def disk_bytes(self) -> int:
        """The size a disk made from this image needs at least."""
        return max(self.size or 0, self.virtual_size or 0)

    def check_bootable(self) -> None:
        """ImageNotActive or ImageUnacceptable unless a guest can boot
        from this image (active, with data, raw or qcow2 in ``bare``)."""
        if self.status != ACTIVE:
            raise exception.ImageNotActive(image_id=self.id,
                                           status=self.status)
        if self.disk_format not in BOOTABLE_DISK_FORMATS:
            raise exception.ImageUnacceptable(
                image_ref=self.id,
                reason='disk_format %r is not supported; allowed: %s' % (
                    self.disk_format, ', '.join(BOOTABLE_DISK_FORMATS)))
        if self.container_format not in ('bare', None):
            raise exception.ImageUnacceptable(
                image_ref=self.id,
                reason='container_format %r is not supported; allowed: '
                       'bare' % self.container_format)


def load_adapter(conf: cfg.ConfigOpts):
    """A keystoneauth1 adapter for Glance from ``conf``'s ``[glance]``:
    ``endpoint_override``, else the first of ``api_servers``, else the
    service catalog."""
    group = conf[CONF_GROUP]
    kwargs = {}
    if not group.endpoint_override and group.api_servers:
        kwargs['endpoint_override'] = group.api_servers[0]
    return ksa.load_adapter(conf, CONF_GROUP, **kwargs)


class GlanceClient:
    """Glance's v2 image API: show, download, create and upload."""

    def __init__(self, conf: cfg.ConfigOpts, adapter=None) -> None:
        self._adapter = adapter if adapter is not None else \
            load_adapter(conf)
        self._retries = conf[CONF_GROUP].num_retries

    # HTTP plumbing ---------------------------------------------------------

    def _endpoint(self) -> str:
        try:
            endpoint = self._adapter.get_endpoint()
        except ks_exc.ClientException:
            endpoint = None
        return endpoint or '<no [glance] endpoint>'

    def _request(self, method: str, path: str, *, image_id: str | None,
                 allow=(), **kwargs):
        """Send one request, retried while Glance cannot be reached; the
        response if 2xx or in ``allow``."""
        for attempt in range(self._retries + 1):
            try:
                resp = self._adapter.request(path, method, raise_exc=False,
                                             **kwargs)
                break
            except (ks_exc.ConnectionError, ks_exc.EndpointNotFound,
                    ks_exc.DiscoveryFailure,
                    ks_exc.MissingAuthPlugin) as err:
                if attempt == self._retries or not isinstance(
                        err, ks_exc.ConnectionError):
                    raise exception.ImageServiceUnavailable(
                        url=self._endpoint(), error=err) from err
                LOG.warning('Glance at %s: %s (attempt %d of %d)',
                            self._endpoint(), err, attempt + 1,
                            self._retries + 1)
            except ks_exc.HttpError as err:
                # Authentication with Keystone failed (bad credentials).
                raise exception.ImageServiceError(
                    method=method, url=self._endpoint().rstrip('/') + path,
                    status=err.http_status, detail=err.message) from err
        if resp.status_code < 300 or resp.status_code in allow:
            return resp
        if resp.status_code == 404 and image_id is not None:
            raise exception.ImageNotFound(image_id=image_id)
        raise exception.ImageServiceError(
            method=method, url=self._endpoint().rstrip('/') + path,
            status=resp.status_code, detail=resp.text[:500].strip())

    def image_url(self, image_id: str) -> str:
        """The URL of the image in Glance's v2 API."""
        return '%s/v2/images/%s' % (self._endpoint().rstrip('/'), image_id)

    # Reading ---------------------------------------------------------------

    def show(self, image_id: str) -> ImageMeta:
        """The image ``image_id``; ImageNotFound when Glance has none (a
        deleted image included)."""
        if not image_id or '/' in image_id:
            raise exception.ImageNotFound(image_id=image_id)
        resp = self._request('GET', '/v2/images/%s' % image_id,
                             image_id=image_id)
        return ImageMeta.from_glance(resp.json())

    def find(self, image_ref: str) -> ImageMeta:
        """The image whose id, or else only name, is ``image_ref``."""
        try:
            return self.show(image_ref)
        except exception.ImageNotFound:
            found = self.list(name=image_ref)
            if len(found) != 1:
                raise
            return found[0]

    def list(self, **filters: str) -> list[ImageMeta]:
        """The images Glance lists with ``filters`` (e.g. ``name``; the
        first page, Glance's default page size)."""
        resp = self._request('GET', '/v2/images', image_id=None,
                             params=filters)
        return [ImageMeta.from_glance(body)
                for body in resp.json().get('images', [])]

    def download(self, image_id: str, path: str) -> ImageMeta:
        """Write the data of the active image ``image_id`` to ``path``.

        Streamed into a temporary file in ``path``'s directory, checked
        against the hash Glance recorded, then renamed to ``path``; on
        any failure the temporary file is removed and ``path`` is not
        written. ImageDownloadFailed when the data stops short or does
        not match.
        """
        image = self.show(image_id)
        if image.status != ACTIVE:
            raise exception.ImageNotActive(image_id=image_id,
                                           status=image.status)
        partial = '%s.part-%s' % (path, uuid.uuid4().hex)
        try:
            self._fetch(image, partial)
            os.replace(partial, path)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
        return image

    def _fetch(self, image: ImageMeta, partial: str) -> None:
        """Stream ``image``'s data into ``partial`` and check it."""
        algo = image.os_hash_algo if image.os_hash_value else 'md5'
        expected = image.os_hash_value or image.checksum
        digest = hashlib.new(algo or 'md5')
        written = 0
        resp = self._request('GET', '/v2/images/%s/file' % image.id,
                             image_id=image.id, stream=True)
        try:
            with open(partial, 'wb') as f:
                for chunk in resp.iter_content(CHUNK_SIZE):
                    f.write(chunk)
                    digest.update(chunk)
                    written += len(chunk)
                f.flush()
                os.fsync(f.fileno())
        except (requests.RequestException, OSError) as err:
            raise exception.ImageDownloadFailed(
                image_id=image.id,
                reason='the transfer stopped after %d bytes: %s' % (
                    written, err)) from err
        finally:
            resp.close()
        if image.size is not None and written != image.size:
            raise exception.ImageDownloadFailed(
                image_id=image.id, reason='got %d bytes of %d' % (
                    written, image.size))
        if expected and digest.hexdigest() != expected:
            raise exception.ImageDownloadFailed(
                image_id=image.id, reason='its %s hash %s is not the %s '
                'Glance recorded' % (algo, digest.hexdigest(), expected))

    # Writing ---------------------------------------------------------------

    def create(self, name: str, disk_format: str = 'qcow2',
               container_format: str = 'bare',
               properties: dict[str, str] | None = None,
               min_disk: int = 0, min_ram: int = 0,
               owner: str | None = None) -> ImageMeta:
        """A new image record (status ``queued``) without data, of the
        project ``owner`` if given (else of the client's own)."""
        body = dict(properties or {})
        body.update(name=name, disk_format=disk_format,
                    container_format=container_format, min_disk=min_disk,
                    min_ram=min_ram)
        if owner is not None:
            body['owner'] = owner
        resp = self._request('POST', '/v2/images', image_id=None, json=body)
        return ImageMeta.from_glance(resp.json())

    def upload(self, image_id: str, path: str) -> ImageMeta:
        """Upload the file ``path`` as the data of the queued image
        ``image_id``; the image as Glance then has it (active)."""
        with open(path, 'rb') as f:
            self._request(
                'PUT', '/v2/images/%s/file' % image_id, image_id=image_id,
                data=iter(lambda: f.read(CHUNK_SIZE), b''),
                headers={'Content-Type': 'application/octet-stream'})
        return self.show(image_id)

    def update_properties(self, image_id: str, set_: dict[str, str],
                          remove: tuple[str, ...] = ()) -> ImageMeta:
        """Set the properties ``set_`` and remove those named in
        ``remove`` (a JSON patch of Glance's v2 API); the image after."""
        patch = [{'op': 'add', 'path': '/%s' % key, 'value': value}
                 for key, value in sorted(set_.items())]
        patch += [{'op': 'remove', 'path': '/%s' % key} for key in remove]
        resp = self._request('PATCH', '/v2/images/%s' % image_id,
                             image_id=image_id, json=patch,
                             headers={'Content-Type': PATCH_MEDIA_TYPE})
        return ImageMeta.from_glance(resp.json())

    def delete(self, image_id: str) -> None:
        """Delete the image; one already gone is fine."""
        self._request('DELETE', '/v2/images/%s' % image_id,
                      image_id=None, allow=(404,))
