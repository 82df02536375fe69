"""Tests for the Placement query built from a flavor and PCI requests."""


from nova.db import records
from nova import test
from nova import exception
from nova.pci import request as pci_request
from nova.scheduler import request_builder

RID = '11111111-2222-3333-4444-555555555555'
RID2 = '99999999-8888-7777-6666-555555555555'
BASE = 'resources=DISK_GB:10,MEMORY_MB:4096,VCPU:4'


def _flavor(**extra_specs):
    return records.FlavorSnapshot.of_flavor(
        {'vcpus': 4, 'memory_mb': 4096, 'root_gb': 10,
         'extra_specs': extra_specs})


def _pci(count, group_type='nvlink', rid=RID, rc='PGPU', traits=(),
         numa_policy='legacy'):
    return pci_request.InstancePCIRequest(
        request_id=rid, alias_name='h200', count=count,
        spec=[{'resource_class': rc}], numa_policy=numa_policy,
        group_type=group_type, resource_class=rc, traits=set(traits))


def _qs(pci_requests, flavor=None, limit=None):
    request = request_builder.build_resource_request(
        flavor or _flavor(), pci_requests)
    return request.to_querystring(limit)


class TestFlavorGroup(test.TestCase):

    def test_plain_flavor(self):
        self.assertEqual('limit=1000&' + BASE, _qs([], limit=1000))

    def test_no_disk_when_root_gb_zero(self):
        flavor = records.FlavorSnapshot.of_flavor(
            {'vcpus': 1, 'memory_mb': 512, 'root_gb': 0, 'extra_specs': {}})
        self.assertEqual('resources=MEMORY_MB:512,VCPU:1', _qs([], flavor))

    def test_resources_override(self):
        flavor = _flavor(**{'resources:VCPU': '0',
                            'resources:DISK_GB': '20',
                            'resources:CUSTOM_MAGIC': '2'})
        self.assertEqual(
            'resources=CUSTOM_MAGIC:2,DISK_GB:20,MEMORY_MB:4096', _qs(
                [], flavor))

    def test_traits(self):
        flavor = _flavor(**{'trait:HW_CPU_X86_AVX2': 'required',
                            'trait:CUSTOM_SLOW': 'forbidden',
                            'hw:cpu_policy': 'dedicated'})
        self.assertEqual(
            'required=HW_CPU_X86_AVX2,!CUSTOM_SLOW&' + BASE, _qs([], flavor))

    def test_invalid_extra_specs(self):
        cases = [
            ({'resources:VCPU': 'two'}, 'resources:VCPU', 'two'),
            ({'resources:VCPU': '-1'}, 'resources:VCPU', '-1'),
            ({'resources:vcpu': '1'}, 'resources:vcpu', '1'),
            ({'resources:NOT_A_CLASS': '1'}, 'resources:NOT_A_CLASS', '1'),
            ({'resources1:VCPU': '1'}, 'resources1:VCPU', 'granular'),
            ({'trait:CUSTOM_X': 'preferred'}, 'trait:CUSTOM_X', 'preferred'),
            ({'trait:NO_SUCH_TRAIT': 'required'}, 'trait:NO_SUCH_TRAIT',
             'required'),
            ({'trait_a:CUSTOM_X': 'required'}, 'trait_a:CUSTOM_X',
             'granular'),
            ({'group_policy': 'spread'}, 'group_policy', 'isolate'),
        ]
        for specs, key, word in cases:
            exc = self.assertRaises(
                exception.FlavorExtraSpecInvalid,
                request_builder.build_resource_request,
                _flavor(**specs), [])
            self.assertIn(key, str(exc))
            self.assertIn(word, str(exc))


class TestCheckExtraSpecs(test.TestCase):

    def test_pci_classes_refused_in_flavor_resources(self):
        for key in ('resources:PGPU', 'resources:CUSTOM_PCI_10DE_2335',
                    'resources:CUSTOM_PCI_GROUP_NVLINK'):
            exc = self.assertRaises(
                exception.FlavorExtraSpecInvalid,
                request_builder.check_extra_specs, {key: '2'}, {'PGPU'})
            self.assertIn("%s='2'" % key, exc.message)
            self.assertIn('configured: PGPU', exc.message)
            self.assertIn('pci_passthrough:alias=<alias>:<count>',
                          exc.message)

    def test_traits_nova_owns_on_pci_providers_refused(self):
        for trait in ('CUSTOM_PCI_GROUP_NVLINK_2', 'CUSTOM_PCI_GROUP_NVLINK',
                      'CUSTOM_PCI_GROUP_NVLINK_2_M0', 'CUSTOM_PCI_NUMA_LOCAL',
                      'CUSTOM_PCI_FREE_PGPU_4', 'COMPUTE_MANAGED_PCI_DEVICE',
                      'OWNER_NOVA'):
            for value in ('required', 'forbidden'):
                exc = self.assertRaises(
                    exception.FlavorExtraSpecInvalid,
                    request_builder.check_extra_specs,
                    {'trait:' + trait: value}, {'PGPU'})
                self.assertIn("trait:%s='%s'" % (trait, value), exc.message)
                self.assertIn('pci_passthrough:alias=<alias>:<count>',
                              exc.message)
        # Other traits, custom or standard, stay the operator's.
        request_builder.check_extra_specs(
            {'trait:CUSTOM_PCIE_GEN5': 'required',
             'trait:COMPUTE_SOCKET_PCI_NUMA_AFFINITY': 'required'})

    def test_granular_pci_request_refused(self):
        exc = self.assertRaises(
            exception.FlavorExtraSpecInvalid,
            request_builder.check_extra_specs, {'resources1:PGPU': '1'},
            {'PGPU'})
        self.assertIn('resources1:PGPU', exc.message)
        self.assertIn('granular request groups (resources<N>:)',
                      exc.message)

    def test_amounts(self):
        for bad in ('2147483648', '1.5', '\u00b2', '+1', '', 'x'):
            exc = self.assertRaises(
                exception.FlavorExtraSpecInvalid,
                request_builder.check_extra_specs, {'resources:VCPU': bad})
            self.assertIn('integer from 0 to 2147483647', exc.message)
        request_builder.check_extra_specs({'resources:VCPU': '2147483647'})
        # 0 drops a class; harmless even for a PCI class.
        request_builder.check_extra_specs({'resources:PGPU': '0'}, {'PGPU'})

    def test_group_policy(self):
        for good in ('none', 'isolate'):
            request_builder.check_extra_specs({'group_policy': good})
        exc = self.assertRaises(
            exception.FlavorExtraSpecInvalid,
            request_builder.check_extra_specs, {'group_policy': 'spread'})
        self.assertIn("group_policy='spread'", exc.message)
        self.assertIn('allowed values are none, isolate', exc.message)

    def test_build_uses_the_same_check(self):
        exc = self.assertRaises(
            exception.FlavorExtraSpecInvalid,
            request_builder.build_resource_request,
            _flavor(**{'resources:PGPU': '1'}), [], {'PGPU'})
        self.assertIn('resources:PGPU', exc.message)


class TestPciGroups(test.TestCase):

    def test_one_gpu_of_group_alias_is_one_group(self):
        # A device that can be used only inside its groups (no partition
        # of its own) is not a single GPU.
        self.assertEqual(
            'group_policy=none&required%s-0=!CUSTOM_PCI_GROUP_ONLY&' % RID +
            BASE + '&resources%s-0=PGPU:1' % RID, _qs([_pci(1)]))

    def test_one_device_of_plain_alias_is_plain(self):
        self.assertEqual(
            'group_policy=none&' + BASE + '&resources%s-0=PGPU:1' % RID,
            _qs([_pci(1, group_type=None)]))

    def test_pair(self):
        self.assertEqual(
            'group_policy=none'
            '&required{r}-0=CUSTOM_PCI_GROUP_NVLINK_2_M0'
            '&required{r}-1=CUSTOM_PCI_GROUP_NVLINK_2_M1'
            '&required{r}-g=CUSTOM_PCI_GROUP_NVLINK_2'
            '&{base}'
            '&resources{r}-0=PGPU:1&resources{r}-1=PGPU:1'
            '&same_subtree={r}-0,{r}-1,{r}-g'.format(r=RID, base=BASE),
            _qs([_pci(2)]))

    def test_required_pair_needs_a_numa_local_group(self):
        self.assertEqual(
            'group_policy=none'
            '&required{r}-0=CUSTOM_PCI_GROUP_NVLINK_2_M0'
            '&required{r}-1=CUSTOM_PCI_GROUP_NVLINK_2_M1'
            '&required{r}-g=CUSTOM_PCI_GROUP_NVLINK_2,CUSTOM_PCI_NUMA_LOCAL'
            '&{base}'
            '&resources{r}-0=PGPU:1&resources{r}-1=PGPU:1'
            '&same_subtree={r}-0,{r}-1,{r}-g'.format(r=RID, base=BASE),
            _qs([_pci(2, numa_policy='required')]))

    def test_required_pair_of_a_two_cell_guest_may_span_nodes(self):
        # hw:numa_nodes=2: nova.pci.numa checks the candidates instead.
        flavor = _flavor(**{'hw:numa_nodes': '2'})
        request = request_builder.build_resource_request(
            flavor, [_pci(2, numa_policy='required')])
        self.assertEqual(2, request.numa_cells)
        self.assertNotIn('CUSTOM_PCI_NUMA_LOCAL', request.to_querystring(None))

    def test_socket_policy_needs_the_host_trait(self):
        self.assertEqual(
            'group_policy=none'
            '&required=COMPUTE_SOCKET_PCI_NUMA_AFFINITY'
            '&required{r}-0=CUSTOM_PCI_GROUP_NVLINK_2_M0'
            '&required{r}-1=CUSTOM_PCI_GROUP_NVLINK_2_M1'
            '&required{r}-g=CUSTOM_PCI_GROUP_NVLINK_2,'
            'CUSTOM_PCI_SOCKET_LOCAL'
            '&{base}'
            '&resources{r}-0=PGPU:1&resources{r}-1=PGPU:1'
            '&same_subtree={r}-0,{r}-1,{r}-g'.format(r=RID, base=BASE),
            _qs([_pci(2, numa_policy='socket')]))

    def test_plain_requests_add_no_numa_traits(self):
        # Device-level affinity is checked on the candidates instead.
        for policy in ('required', 'preferred', 'legacy'):
            self.assertEqual(
                'group_policy=none&' + BASE +
                '&resources{r}-0=PGPU:1&resources{r}-1=PGPU:1'.format(
                    r=RID), _qs([_pci(2, group_type=None,
                                      numa_policy=policy)]))

    def test_quad_and_board(self):
        for count in (4, 8):
            params = request_builder.build_resource_request(
                _flavor(), [_pci(count)]).to_query_params(50)
            expected = [('group_policy', 'none'), ('limit', '50'),
                        ('resources', 'DISK_GB:10,MEMORY_MB:4096,VCPU:4')]
            suffixes = []
            for i in range(count):
                suffix = '%s-%d' % (RID, i)
                suffixes.append(suffix)
                expected.append(('required' + suffix,
                                 'CUSTOM_PCI_GROUP_NVLINK_%d_M%d' % (
                                     count, i)))
                expected.append(('resources' + suffix, 'PGPU:1'))
            expected.append(('required%s-g' % RID,
                             'CUSTOM_PCI_GROUP_NVLINK_%d' % count))
            expected.append(('same_subtree', ','.join(
                sorted(suffixes + ['%s-g' % RID]))))
            self.assertEqual(sorted(expected), params)

    def test_plain_alias_two_devices(self):
        self.assertEqual(
            'group_policy=none'
            '&required{r}-0=CUSTOM_FAST&required{r}-1=CUSTOM_FAST'
            '&{base}'
            '&resources{r}-0=CUSTOM_NIC:1'
            '&resources{r}-1=CUSTOM_NIC:1'.format(r=RID, base=BASE),
            _qs([_pci(2, group_type=None, rc='CUSTOM_NIC',
                      traits={'CUSTOM_FAST'})]))

    def test_two_aliases(self):
        request = request_builder.build_resource_request(
            _flavor(), [_pci(2), _pci(1, group_type=None, rid=RID2,
                                      rc='CUSTOM_NIC')])
        self.assertEqual(
            'group_policy=none'
            '&required{r}-0=CUSTOM_PCI_GROUP_NVLINK_2_M0'
            '&required{r}-1=CUSTOM_PCI_GROUP_NVLINK_2_M1'
            '&required{r}-g=CUSTOM_PCI_GROUP_NVLINK_2'
            '&{base}'
            '&resources{r}-0=PGPU:1&resources{r}-1=PGPU:1'
            '&resources{n}-0=CUSTOM_NIC:1'
            '&same_subtree={r}-0,{r}-1,{r}-g'.format(
                r=RID, n=RID2, base=BASE),
            request.to_querystring(None))
        self.assertEqual({RID: 2, RID2: 1}, request.pci_device_counts)
        # The providers of each device, by request, in device order; the
        # group provider's mapping (suffix -g) is no device.
        self.assertEqual({RID: ['rp-b', 'rp-a'], RID2: ['rp-n']},
                         request.pci_providers({'mappings': {
                             '': ['root'], '%s-0' % RID: ['rp-b'],
                             '%s-1' % RID: ['rp-a'], '%s-g' % RID: ['grp'],
                             '%s-0' % RID2: ['rp-n']}}))
        self.assertEqual({'PGPU', 'CUSTOM_NIC'},
                         request.pci_resource_classes)
        partition = [g for g in request.groups
                     if g.suffix == '%s-g' % RID][0]
        self.assertEqual({}, partition.resources)
        self.assertEqual(RID, partition.requester_id)

    def test_group_policy_from_flavor(self):
        self.assertIn('group_policy=isolate',
                      _qs([_pci(2)], _flavor(group_policy='isolate')))
        # Without suffixed groups there is nothing to apply a policy to.
        self.assertEqual(BASE, _qs([], _flavor(group_policy='isolate')))

    def test_request_carries_its_pci_requests(self):
        # The later steps (NUMA affinity, refusal reasons) read them from
        # the request, not from a parallel argument.
        pci = [_pci(4), _pci(1, group_type=None, rid=RID2)]
        request = request_builder.build_resource_request(_flavor(), pci)
        self.assertEqual(pci, request.pci_requests)
        self.assertEqual({RID: 4, RID2: 1}, request.pci_device_counts)

    def test_suffixes_are_placement_valid(self):
        request = request_builder.build_resource_request(
            _flavor(), [_pci(8)])
        for group in request.groups[1:]:
            self.assertRegex(group.suffix, r'^[a-zA-Z0-9_-]{1,64}$')
