"""Root disks from base images: what ``qemu-img`` says a base image is,
and the qcow2 overlay a guest boots from.

The base is a Glance image's data in the compute's image cache (see
``imagecache``). A guest never writes to it: its root disk is a qcow2
overlay backed by it, so many guests share one base and a rebuild starts
again from the image.
"""

import dataclasses
import json
import os
import subprocess

from nova import exception

GiB = 1024 ** 3
# Image formats an overlay may be backed by.
FORMATS = ('raw', 'qcow2')
# qemu-img answers in well under a second; this bounds a hung NFS mount.
QEMU_IMG_TIMEOUT = 60


@dataclasses.dataclass(frozen=True)
class ImageInfo:
    """An image file as ``qemu-img info`` describes it."""
    path: str
    format: str
    virtual_size: int


def _qemu_img(image_ref: str, *args: str) -> str:
    """Run ``qemu-img`` on ``image_ref``'s file; its output, or
    ImageUnacceptable with qemu-img's error."""
    cmd = ('qemu-img',) + args
    try:
        result = subprocess.run(cmd, capture_output=True, text=True,
                                check=True, timeout=QEMU_IMG_TIMEOUT)
    except FileNotFoundError as err:
        raise exception.ImageUnacceptable(
            image_ref=image_ref, reason='qemu-img is not installed '
            '(Debian package qemu-utils)') from err
    except subprocess.TimeoutExpired as err:
        raise exception.ImageUnacceptable(
            image_ref=image_ref, reason='%s took over %d s' % (
                ' '.join(cmd), QEMU_IMG_TIMEOUT)) from err
    except subprocess.CalledProcessError as err:
        raise exception.ImageUnacceptable(
            image_ref=image_ref, reason='%s failed: %s' % (
                ' '.join(cmd), err.stderr.strip())) from err
    return result.stdout


def image_info(path: str) -> ImageInfo:
    """Format and virtual size of the image at ``path``; an image that
    is not raw or qcow2, or has a backing file of its own, is refused
    (an image is one self-contained file)."""
    info = json.loads(_qemu_img(
        os.path.basename(path), 'info', '--output=json', path))
    fmt = info.get('format')
    if fmt not in FORMATS:
        raise exception.ImageUnacceptable(
            image_ref=os.path.basename(path),
            reason='format %r is not allowed; allowed: %s' % (
                fmt, ', '.join(FORMATS)))
    if info.get('backing-filename'):
        raise exception.ImageUnacceptable(
            image_ref=os.path.basename(path),
            reason='it has a backing file (%s); an image must be one '
                   'file' % info['backing-filename'])
    return ImageInfo(path, fmt, int(info['virtual-size']))


def backing_file(path: str) -> str | None:
    """The backing file of the disk at ``path`` (None: it has none)."""
    info = json.loads(_qemu_img(
        os.path.basename(path), 'info', '--output=json', '-U', path))
    return info.get('full-backing-filename') or info.get('backing-filename')


def create_overlay(image: ImageInfo, overlay: str, size_gb: int) -> None:
    """Write a qcow2 overlay at ``overlay`` backed by ``image``: of
    ``size_gb`` GiB, or the image's own size when ``size_gb`` is 0.

    FlavorDiskSmallerThanImage when ``size_gb`` cannot hold the image.
    """
    size = size_gb * GiB
    if size and size < image.virtual_size:
        raise exception.FlavorDiskSmallerThanImage(
            flavor_gb=size_gb, image_ref=os.path.basename(image.path),
            image_bytes=image.virtual_size)
    _qemu_img(os.path.basename(image.path), 'create', '-q', '-f', 'qcow2',
              '-b', image.path, '-F', image.format, overlay,
              str(size or image.virtual_size))


def convert_to_qcow2(disk: str, target: str) -> None:
    """Write ``disk`` with its backing chain flattened into one qcow2 file
    at ``target`` (a snapshot; ``-U``: QEMU may hold the disk open)."""
    _qemu_img(os.path.basename(disk), 'convert', '-U', '-O', 'qcow2',
              disk, target)
