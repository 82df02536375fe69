"""ImageMeta, the image client's record of a Glance image."""

from nova import exception
from nova import test
from nova.image import glance

BODY = {'id': 'abc', 'name': 'cuda', 'status': 'active',
        'disk_format': 'qcow2', 'container_format': 'bare', 'size': 10,
        'min_disk': 1, 'min_ram': 0, 'checksum': 'x', 'os_hash_algo':
        'sha512', 'os_hash_value': 'y', 'visibility': 'public',
        'hw_machine_type': 'q35', 'hw_firmware_type': 'uefi',
        'tags': [], 'os_hidden': False}


class ImageMetaTestCase(test.TestCase):

    def test_from_glance_splits_properties(self):
        image = glance.ImageMeta.from_glance(BODY)
        self.assertEqual({'hw_machine_type': 'q35',
                          'hw_firmware_type': 'uefi'}, image.properties)
        self.assertEqual((1, 0, 10), (image.min_disk, image.min_ram,
                                      image.size))

    def test_bootable(self):
        glance.ImageMeta.from_glance(BODY).check_bootable()

    def test_not_active(self):
        image = glance.ImageMeta.from_glance(dict(BODY, status='queued'))
        err = self.assertRaises(exception.ImageNotActive,
                                image.check_bootable)
        self.assertIn('abc', err.message)
        self.assertIn('queued', err.message)

    def test_unsupported_formats(self):
        for field, value in (('disk_format', 'vmdk'),
                             ('container_format', 'ovf')):
            image = glance.ImageMeta.from_glance(dict(BODY, **{field: value}))
            err = self.assertRaises(exception.ImageUnacceptable,
                                    image.check_bootable)
            self.assertIn(value, err.message)
            self.assertEqual(400, err.code)
