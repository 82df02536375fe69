"""A guest's files under instances_path."""

import os
import stat

import fixtures

from nova import test
from nova.virt.libvirt import guest_files


class GuestFilesTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.files = guest_files.GuestFiles.of(
            self.useFixture(fixtures.TempDir()).path, 'uuid-1')

    def test_paths(self):
        self.assertEqual(('uuid-1', 'disk', 'console.log'), (
            os.path.basename(self.files.directory),
            os.path.relpath(self.files.disk, self.files.directory),
            os.path.relpath(self.files.console_log, self.files.directory)))

    def test_directory_is_searchable_by_qemu(self):
        self.files.create_directory()
        mode = stat.S_IMODE(os.stat(self.files.directory).st_mode)
        self.assertEqual(0o755, mode)

    def test_console_before_any_output_is_empty(self):
        self.assertEqual('', self.files.read_console())

    def test_remove_disk_and_remove_are_idempotent(self):
        self.files.create_directory()
        open(self.files.disk, 'w').close()
        self.files.remove_disk()
        self.files.remove_disk()
        self.assertFalse(os.path.exists(self.files.disk))
        self.files.remove()
        self.files.remove()
        self.assertFalse(os.path.exists(self.files.directory))
