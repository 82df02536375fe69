"""Guest machine choices through the REST API: values checked when
written, and a guest that could not work refused once with the reason.
"""

from nova.tests.functional import test_boot_gpu_groups as boot


class TestGuestMachine(boot.BootTestBase):

    def setUp(self):
        super().setUp()
        self.enable_h200_groups()

    def set_specs(self, flavor, specs, expect=(200,)):
        return self.api('POST', '/flavors/%s/os-extra_specs' % flavor,
                        {'extra_specs': specs}, expect=expect)

    def test_bad_values_are_refused_when_written(self):
        self.start_services()
        flavor = self.flavor('gpu', 'h200:2')
        for specs, text in (
                ({'hw:firmware_type': 'efi'},
                 "hw:firmware_type='efi': allowed values are bios, uefi"),
                ({'hw:machine_type': 'q35 pc'}, "'q35 pc'"),
                ({'hw:numa_nodes': '3'}, 'must divide evenly')):
            body = self.set_specs(flavor, specs, expect=(400,))
            self.assertIn(text, str(body))
        self.set_specs(flavor, {'hw:numa_nodes': '2',
                                'hw:firmware_type': 'uefi'})

    def test_gpu_guest_on_i440fx_fails_once_with_the_reason(self):
        self.start_services(hosts=('cmp1', 'cmp2'))
        flavor = self.flavor('gpu.pc', 'h200:2')
        self.set_specs(flavor, {'hw:machine_type': 'pc'})
        failed = self.boot(flavor, 'pc', status='ERROR')
        message = failed['fault']['message']
        self.assertIn('machine type pc has no PCIe root ports for the 2 '
                      'passed-through device(s)', message)
        self.assertIn('every host would refuse it', message)
        # Not rescheduled: no earlier attempt on another host.
        self.assertNotIn('Earlier attempts', message)
        self.assert_nothing_held(failed['id'])

    def test_gpu_guest_gets_a_pcie_machine_by_default(self):
        self.start_services()
        server = self.boot(self.flavor('gpu', 'h200:2'), 'q35')
        host = self.computes['cmp1'].driver.host
        xml = host.lookup_domain(server['id']).XMLDesc()
        self.assertIn("machine='q35'", xml)
        self.assertIn("firmware='efi'", xml)
        self.assertEqual(2, xml.count("model='pcie-root-port'"))
