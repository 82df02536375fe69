"""Base images: what qemu-img reports of them."""

import json
from unittest import mock


from nova import exception
from nova import test
from nova.virt.libvirt import imagebackend


class ImageInfoTest(test.TestCase):

    def info(self, answer: dict):
        with mock.patch.object(imagebackend, '_qemu_img',
                               return_value=json.dumps(answer)):
            return imagebackend.image_info('/images/x.img')

    def test_raw_and_qcow2(self):
        for fmt in ('raw', 'qcow2'):
            self.assertEqual(
                imagebackend.ImageInfo('/images/x.img', fmt, 1024),
                self.info({'format': fmt, 'virtual-size': 1024}))

    def test_other_formats_are_refused(self):
        err = self.assertRaises(exception.ImageUnacceptable, self.info,
                                {'format': 'vmdk', 'virtual-size': 1})
        self.assertIn("'vmdk' is not allowed; allowed: raw, qcow2",
                      str(err))

    def test_an_image_with_a_backing_file_is_refused(self):
        err = self.assertRaises(
            exception.ImageUnacceptable, self.info,
            {'format': 'qcow2', 'virtual-size': 1,
             'backing-filename': '/etc/shadow'})
        self.assertIn('/etc/shadow', str(err))

    def test_qemu_img_errors_name_the_image(self):
        with mock.patch('subprocess.run',
                        side_effect=FileNotFoundError('qemu-img')):
            err = self.assertRaises(exception.ImageUnacceptable,
                                    imagebackend.image_info, '/i/x.img')
        self.assertIn("'x.img'", str(err))
        self.assertIn('qemu-utils', str(err))
