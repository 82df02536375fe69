"""The compute's cache of base images, under
``$instances_path/$[image_cache]subdirectory_name`` (``_base``).

A guest's root disk is a qcow2 overlay backed by a base image file here
(see ``imagebackend``); the base is the Glance image's data, downloaded
once per compute: concurrent boots of one image wait for the one download
(a lock per image id), and a download lands under a temporary name and
is renamed only when complete and checked (``GlanceClient.download``), so
a download cut short is never used. The image cache manager
(:meth:`ImageCache.remove_unused`, run periodically by the compute
every ``[image_cache]manager_interval`` seconds) removes bases no guest
uses that were last used longer than
``remove_unused_original_minimum_age_seconds`` ago, and the temporary
files of downloads that died with their process.

A base stays while a guest's overlay uses it, even after its image is
deleted in Glance: servers keep working.
"""

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from oslo_config import cfg
from oslo_log import log as logging

from nova import exception
from nova.image import glance

LOG = logging.getLogger(__name__)

# The marker of a download in progress (see GlanceClient.download).
PARTIAL_MARK = '.part-'
# A temporary file older than this belongs to no live download.
STALE_PARTIAL_SECONDS = 24 * 3600


class ImageCache:
    """Base images of one compute in ``directory``, fetched from Glance
    through the client ``client_factory`` builds (on first use)."""

    def __init__(self, directory: str,
                 client_factory: Callable[[], glance.GlanceClient]) -> None:
        # Absolute: overlays name their base by this path.
        self.directory = os.path.abspath(directory)
        self._client_factory = client_factory
        self._client: glance.GlanceClient | None = None
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    @classmethod
    def from_config(cls, conf: cfg.ConfigOpts) -> 'ImageCache':
        """The cache under ``instances_path`` reaching Glance with
        ``[glance]``."""
        return cls(os.path.join(conf.instances_path,
                                conf.image_cache.subdirectory_name),
                   lambda: glance.GlanceClient(conf))

    def _lock(self, image_id: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(image_id, threading.Lock())

    def _glance(self) -> glance.GlanceClient:
        with self._guard:
            if self._client is None:
                self._client = self._client_factory()
            return self._client

    def path(self, image_id: str) -> str:
        """Where the base of ``image_id`` is (or would be) kept."""
        if not image_id or '/' in image_id or image_id.startswith('.') \
                or PARTIAL_MARK in image_id:
            raise exception.ImageNotFound(image_id=image_id)
        return os.path.join(self.directory, image_id)

    @contextlib.contextmanager
    def use(self, image_id: str) -> Iterator[str]:
        """The path of the base of ``image_id``, downloaded from Glance
        unless cached, its use time renewed; the base is not removed
        while the ``with`` block (making an overlay of it) runs."""
        path = self.path(image_id)
        with self._lock(image_id):
            if os.path.exists(path):
                os.utime(path)
            else:
                os.makedirs(self.directory, exist_ok=True)
                LOG.info('Downloading image %s to %s', image_id, path)
                self._glance().download(image_id, path)
            yield path

    def cached(self) -> list[str]:
        """Image ids with a base here."""
        if not os.path.isdir(self.directory):
            return []
        return sorted(name for name in os.listdir(self.directory)
                      if PARTIAL_MARK not in name)

    def remove_unused(self, in_use: Iterable[str],
                      min_age_seconds: int) -> list[str]:
        """Remove the bases not in ``in_use`` (base paths) last used over
        ``min_age_seconds`` ago, and stale partial downloads; the image
        ids removed."""
        in_use = {os.path.abspath(path) for path in in_use}
        now = time.time()
        removed = []
        if not os.path.isdir(self.directory):
            return removed
        for name in os.listdir(self.directory):
            path = os.path.join(self.directory, name)
            if PARTIAL_MARK in name:
                if now - os.path.getmtime(path) > STALE_PARTIAL_SECONDS:
                    os.unlink(path)
                continue
            if os.path.abspath(path) in in_use:
                continue
            with self._lock(name):
                try:
                    age = now - os.path.getmtime(path)
                except FileNotFoundError:
                    continue
                if age < min_age_seconds:
                    continue
                LOG.info('Removing base image %s: unused for %d s', name,
                         age)
                os.unlink(path)
                removed.append(name)
        return removed
