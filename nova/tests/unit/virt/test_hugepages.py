"""hw:mem_page_size parsing and where a guest's hugepages go."""

from nova import exception
from nova import test
from nova.db import records
from nova.virt import guest_hardware
from nova.virt import hardware
from nova.virt import hugepages

GIB = 1048576
MIB2 = 2048


def _topology(gib_pages=(4, 4), mib2_pages=(0, 0)):
    """Two host nodes with pools of 1 GiB and 2 MiB pages."""
    return hardware.HostNUMATopology(tuple(
        hardware.NUMACell(
            id=node, cpus=(node,), memory_mb=65536, socket=node,
            pages=(hardware.PagePool(MIB2, mib2_pages[node]),
                   hardware.PagePool(GIB, gib_pages[node])))
        for node in range(len(gib_pages))))


class RequestTest(test.TestCase):

    def _request(self, value, image=None):
        return hugepages.request_of(
            {hugepages.MEM_PAGE_SIZE_SPEC: value},
            {hugepages.MEM_PAGE_SIZE_PROP: image} if image else None)

    def test_sizes_as_upstream(self):
        for value, kib in (('2MB', MIB2), ('2M', MIB2), ('2MiB', MIB2),
                           ('2mb', MIB2), ('1GB', GIB), ('1G', GIB),
                           ('1 GiB', GIB), ('2048', MIB2),
                           ('1048576', GIB), ('2048KB', MIB2),
                           ('2097152B', MIB2)):
            self.assertEqual(hugepages.PageRequest(size_kib=kib),
                             self._request(value), value)

    def test_keywords(self):
        self.assertIsNone(self._request('small'))
        # The base page exactly is ordinary pages too.
        self.assertIsNone(self._request('4'))
        self.assertEqual(hugepages.PageRequest(), self._request('large'))
        self.assertEqual(hugepages.PageRequest(fallback=True),
                         self._request('ANY'))
        self.assertIsNone(hugepages.request_of({}, {}))

    def test_bad_value_named_with_allowed(self):
        for value in ('huge', '3MB', '1.5GB', '0', '2', '12K', '1GX',
                      '-1'):
            err = self.assertRaises(exception.FlavorExtraSpecInvalid,
                                    self._request, value)
            self.assertIn('hw:mem_page_size=%r' % value, err.message)
            self.assertIn(hugepages.ALLOWED, err.message)

    def test_image_chooses_only_where_flavor_lets_it(self):
        self.assertEqual(hugepages.PageRequest(size_kib=MIB2),
                         self._request('large', image='2MB'))
        self.assertEqual(hugepages.PageRequest(size_kib=GIB),
                         self._request('any', image='1GB'))
        for flavor in ('1GB', 'small'):
            err = self.assertRaises(exception.Invalid, self._request,
                                    flavor, image='2MB')
            self.assertIn('hw_mem_page_size=2MB is not allowed with '
                          'flavor hw:mem_page_size=%s' % flavor,
                          err.message)
        err = self.assertRaises(
            exception.Invalid, hugepages.request_of, {},
            {hugepages.MEM_PAGE_SIZE_PROP: '1GB'})
        self.assertIn('<unset>', err.message)

    def test_bad_image_property_named(self):
        err = self.assertRaises(
            exception.Invalid, guest_hardware.check_image_properties,
            {hugepages.MEM_PAGE_SIZE_PROP: 'huge'})
        self.assertIn("hw_mem_page_size 'huge' is not allowed",
                      err.message)

    def test_flavor_cells_must_hold_whole_pages(self):
        guest_hardware.check_flavor(records.FlavorSnapshot.of_flavor({
            'vcpus': 4, 'memory_mb': 4096,
            'extra_specs': {'hw:mem_page_size': '1GB',
                            'hw:numa_nodes': '2'}}))
        err = self.assertRaises(
            exception.FlavorExtraSpecInvalid, guest_hardware.check_flavor,
            records.FlavorSnapshot.of_flavor(
                {'vcpus': 4, 'memory_mb': 3072,
                 'extra_specs': {'hw:mem_page_size': '1GB',
                                 'hw:numa_nodes': '2'}}))
        self.assertIn('1536 MiB, not a whole number of 1048576 KiB',
                      err.message)
        # large/any pick a size that fits when the guest is placed.
        guest_hardware.check_flavor(records.FlavorSnapshot.of_flavor({
            'vcpus': 4, 'memory_mb': 1000,
            'extra_specs': {'hw:mem_page_size': 'large'}}))


class PlaceTest(test.TestCase):

    def test_exact_size_on_lowest_node_with_room(self):
        pages = hugepages.place(hugepages.PageRequest(size_kib=GIB), 4096,
                                1, _topology(), {(0, GIB): 1})
        self.assertEqual(hugepages.GuestPages(GIB, (1,), (4096,)), pages)
        self.assertEqual({1: 4}, pages.pages_by_node())

    def test_cells_on_distinct_nodes(self):
        pages = hugepages.place(hugepages.PageRequest(size_kib=GIB), 4096,
                                2, _topology(), {})
        self.assertEqual((0, 1), pages.numa_nodes)
        self.assertEqual({0: 2, 1: 2}, pages.pages_by_node())

    def test_confined_nodes_must_hold_the_pages(self):
        request = hugepages.PageRequest(size_kib=GIB)
        pages = hugepages.place(request, 4096, 2, _topology(), {}, (1,))
        self.assertEqual({1: 4}, pages.pages_by_node())
        err = self.assertRaises(
            exception.HugepagesUnavailable, hugepages.place, request,
            4096, 2, _topology(), {(1, GIB): 1}, (1,))
        self.assertIn('1048576 KiB pages: 2 needed per guest cell on host '
                      'node(s) 1, host node 1: 3 of 4 free', err.message)

    def test_large_falls_back_to_smaller_hugepages_never_small(self):
        topology = _topology(gib_pages=(1, 1), mib2_pages=(2048, 0))
        pages = hugepages.place(hugepages.PageRequest(), 2048, 1,
                                topology, {})
        self.assertEqual(hugepages.GuestPages(MIB2, (0,), (2048,)), pages)
        err = self.assertRaises(
            exception.HugepagesUnavailable, hugepages.place,
            hugepages.PageRequest(), 8192, 1, topology, {})
        self.assertIn('1048576 KiB pages', err.message)
        self.assertIn('2048 KiB pages', err.message)

    def test_large_skips_sizes_that_do_not_divide_a_cell(self):
        pages = hugepages.place(hugepages.PageRequest(), 1536, 1,
                                _topology(mib2_pages=(1024, 0)), {})
        self.assertEqual(MIB2, pages.page_size_kib)

    def test_any_runs_on_ordinary_pages_when_nothing_fits(self):
        self.assertIsNone(hugepages.place(
            hugepages.PageRequest(fallback=True), 65536, 1, _topology(),
            {}))

    def test_host_without_hugepages(self):
        topology = hardware.HostNUMATopology((hardware.NUMACell(
            id=0, cpus=(0,), memory_mb=1024, socket=0),))
        err = self.assertRaises(
            exception.HugepagesUnavailable, hugepages.place,
            hugepages.PageRequest(), 1024, 1, topology, {})
        self.assertIn('host node(s) 0 have no hugepages', err.message)

    def test_more_cells_than_nodes_refused(self):
        self.assertRaises(
            exception.HugepagesUnavailable, hugepages.place,
            hugepages.PageRequest(size_kib=GIB), 3072, 3, _topology(), {})
