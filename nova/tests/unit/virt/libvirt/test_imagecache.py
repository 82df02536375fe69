"""The image cache's bookkeeping: where bases are, what ages out."""

import os
import time

import fixtures

from nova import exception
from nova import test
from nova.compute import manager as compute_manager
from nova.virt.libvirt import imagecache


class FakeGlance:
    """Writes a few bytes for any image, counting downloads."""

    def __init__(self):
        self.downloads = []

    def download(self, image_id, path):
        self.downloads.append(image_id)
        with open(path, 'wb') as f:
            f.write(b'image')


class ImageCacheTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.dir = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                '_base')
        self.glance = FakeGlance()
        self.cache = imagecache.ImageCache(self.dir, lambda: self.glance)

    def age(self, name, seconds):
        then = time.time() - seconds
        os.utime(os.path.join(self.dir, name), (then, then))

    def test_bad_image_ids_are_refused(self):
        for image_id in ('', '../x', 'a/b', '.hidden', 'x.part-1'):
            self.assertRaises(exception.ImageNotFound, self.cache.path,
                              image_id)

    def test_cached_once_and_use_time_renewed(self):
        for _ in range(2):
            with self.cache.use('img') as path:
                self.assertEqual(os.path.join(self.dir, 'img'), path)
        self.assertEqual(['img'], self.glance.downloads)
        self.age('img', 100)
        with self.cache.use('img'):
            pass
        self.assertLess(time.time() - os.path.getmtime(
            os.path.join(self.dir, 'img')), 50)

    def test_remove_unused_keeps_used_and_young_bases(self):
        for image_id in ('used', 'young', 'old'):
            with self.cache.use(image_id):
                pass
        self.age('used', 1000)
        self.age('old', 1000)
        removed = self.cache.remove_unused(
            [os.path.join(self.dir, 'used')], 500)
        self.assertEqual(['old'], removed)
        self.assertEqual(['used', 'young'], self.cache.cached())

    def test_stale_partials_go_young_ones_stay(self):
        os.makedirs(self.dir)
        for name in ('a.part-1', 'b.part-2'):
            open(os.path.join(self.dir, name), 'w').close()
        self.age('a.part-1', imagecache.STALE_PARTIAL_SECONDS + 1)
        self.cache.remove_unused([], 0)
        self.assertEqual(['b.part-2'], os.listdir(self.dir))
        self.assertEqual([], self.cache.cached())


class ManagerIntervalTest(test.TestCase):

    def test_interval(self):
        conf = test.make_conf()
        conf.set_override('update_resources_interval', 60)
        for option, interval in ((2400, 2400), (0, 60), (-1, 0)):
            conf.set_override('manager_interval', option,
                              group='image_cache')
            self.assertEqual(interval,
                             compute_manager._image_cache_interval(conf))
