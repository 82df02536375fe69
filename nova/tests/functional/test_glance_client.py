"""nova's Glance client against a real Glance (the ``glance`` package)."""

import os

import fixtures

from nova import exception
from nova import test
from nova.tests.fixtures import glance as glance_fixture


class GlanceClientTestCase(test.TestCase):

    def setUp(self):
        super().setUp()
        self.glance = self.useFixture(glance_fixture.GlanceFixture())
        self.client = self.glance.client
        self.dir = self.useFixture(fixtures.TempDir()).path

    def stored_file(self, image_id: str) -> str:
        return os.path.join(self.glance.state_dir, 'images', image_id)

    def test_show_find_and_properties(self):
        image = self.glance.upload('cuda-12', min_disk=2, min_ram=512,
                                   hw_machine_type='q35')
        shown = self.client.show(image.id)
        self.assertEqual(('cuda-12', 'active', 'qcow2', 'bare', 2, 512),
                         (shown.name, shown.status, shown.disk_format,
                          shown.container_format, shown.min_disk,
                          shown.min_ram))
        self.assertEqual('q35', shown.properties['hw_machine_type'])
        self.assertEqual(os.path.getsize(self.stored_file(image.id)),
                         shown.size)
        self.assertEqual(image.id, self.client.find('cuda-12').id)

    def test_download_writes_the_image(self):
        image = self.glance.upload('img')
        target = os.path.join(self.dir, 'base')
        self.client.download(image.id, target)
        with open(target, 'rb') as got, \
                open(self.stored_file(image.id), 'rb') as stored:
            self.assertEqual(stored.read(), got.read())
        self.assertEqual(['base'], os.listdir(self.dir))

    def test_corrupt_data_is_refused_and_not_kept(self):
        image = self.glance.upload('img')
        with open(self.stored_file(image.id), 'r+b') as f:
            f.seek(100)
            f.write(b'corrupt')
        target = os.path.join(self.dir, 'base')
        err = self.assertRaises(exception.ImageDownloadFailed,
                                self.client.download, image.id, target)
        self.assertIn('hash', err.message)
        self.assertEqual([], os.listdir(self.dir))

    def test_short_data_is_refused_and_not_kept(self):
        image = self.glance.upload('img')
        with open(self.stored_file(image.id), 'r+b') as f:
            f.truncate(1000)
        target = os.path.join(self.dir, 'base')
        err = self.assertRaises(exception.ImageDownloadFailed,
                                self.client.download, image.id, target)
        self.assertIn(image.id, err.message)
        self.assertEqual([], os.listdir(self.dir))

    def test_missing_and_deleted_images(self):
        err = self.assertRaises(exception.ImageNotFound, self.client.show,
                                'no-such-image')
        self.assertIn('no-such-image', err.message)
        image = self.glance.upload('img')
        self.client.delete(image.id)
        self.assertRaises(exception.ImageNotFound, self.client.show,
                          image.id)
        self.assertRaises(exception.ImageNotFound, self.client.download,
                          image.id, os.path.join(self.dir, 'base'))

    def test_queued_image_is_not_active(self):
        image = self.client.create('empty')
        err = self.assertRaises(exception.ImageNotActive,
                                self.client.download, image.id,
                                os.path.join(self.dir, 'base'))
        self.assertIn('queued', err.message)

    def test_glance_down_is_a_clear_error(self):
        image = self.glance.upload('img')
        self.glance.stop()
        err = self.assertRaises(exception.ImageServiceUnavailable,
                                self.client.show, image.id)
        self.assertIn(self.glance.url, err.message)
        self.assertEqual(503, err.code)
