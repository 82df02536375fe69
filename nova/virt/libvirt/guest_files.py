"""The files of one guest under ``[DEFAULT]instances_path``:
``<uuid>/disk`` (its root disk overlay) and ``<uuid>/console.log`` (its
serial console, written by libvirt's virtlogd), created with the guest
and removed with it.
"""

import dataclasses
import os
import shutil

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

# The console output handed out is at most the log's last 100 KiB, as
# upstream's libvirt driver caps it.
MAX_CONSOLE_BYTES = 100 * 1024


@dataclasses.dataclass(frozen=True)
class GuestFiles:
    """Where one guest's files are."""
    directory: str

    @classmethod
    def of(cls, instances_path: str, instance_uuid: str) -> 'GuestFiles':
        return cls(os.path.join(instances_path, instance_uuid))

    @property
    def disk(self) -> str:
        return os.path.join(self.directory, 'disk')

    @property
    def console_log(self) -> str:
        return os.path.join(self.directory, 'console.log')

    def create_directory(self) -> None:
        """Create the directory, searchable by others: under
        ``qemu:///system`` QEMU runs as its own user and opens the disk
        by this path."""
        os.makedirs(self.directory, exist_ok=True)
        os.chmod(self.directory, 0o755)

    def remove_disk(self) -> None:
        """Remove the root disk (a rebuild starts from the image again)."""
        try:
            os.unlink(self.disk)
        except FileNotFoundError:
            pass

    def remove(self) -> None:
        """Remove the directory and everything in it; gone is fine."""
        shutil.rmtree(self.directory, ignore_errors=True)
        if os.path.exists(self.directory):
            LOG.warning('Could not remove the guest directory %s',
                        self.directory)

    def read_console(self) -> str:
        """The last MAX_CONSOLE_BYTES of the console log, as text ('' when
        the guest has written nothing yet)."""
        try:
            with open(self.console_log, 'rb') as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - MAX_CONSOLE_BYTES))
                data = log.read()
        except FileNotFoundError:
            return ''
        return data.decode('utf-8', errors='replace')
