"""Nova's records of a host's NVLink partitions: the JSON file and the
hardware failure count that quarantines a partition."""

import os

import fixtures

from nova import exception
from nova import test
from nova.virt.libvirt import nvlink_records


class PartitionRecordsTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.path = nvlink_records.state_file(
            self.useFixture(fixtures.TempDir()).path, 'cmp1', 'partitions')

    def test_saved_records_load_as_they_were(self):
        records = nvlink_records.PartitionRecords.load(self.path)
        self.assertEqual(({}, set(), {}, {}), (
            records.held, records.orphans, records.quarantined,
            records.failures))
        records.held['vm1'] = 3
        records.orphans.add(5)
        records.quarantined[7] = 'link training failed'
        records.failures[8] = 1
        records.save()
        again = nvlink_records.PartitionRecords.load(self.path)
        self.assertEqual(records, again)
        self.assertEqual('vm1', again.holder(3))
        self.assertIsNone(again.holder(5))

    def test_failures_in_a_row_quarantine_at_the_threshold(self):
        records = nvlink_records.PartitionRecords.load(self.path)
        for _ in range(2):
            records.count_hardware_failure(5, '5 (modules 5,7)',
                                           'NVLink training failed', 3)
        self.assertEqual(({5: 2}, {}),
                         (records.failures, records.quarantined))
        records.count_hardware_failure(5, '5 (modules 5,7)',
                                       'NVLink training failed', 3)
        self.assertEqual({}, records.failures)
        self.assertIn('NVLink training failed', records.quarantined[5])
        self.assertIn('5 (modules 5,7) is quarantined', self.logger.output)

    def test_unreadable_file_is_named(self):
        with open(self.path, 'w') as out:
            out.write('{not json')
        err = self.assertRaises(exception.InvalidConfiguration,
                                nvlink_records.PartitionRecords.load,
                                self.path)
        self.assertIn(os.path.basename(self.path), str(err))
