"""The fmpm client against the fake Fabric Manager's real executable."""

import json
import subprocess

import fixtures

from nova import exception
from nova import test
from nova.tests.fixtures import fabric_manager as fake_fm
from nova.virt.fake import fabric_manager as fake
from nova.virt.libvirt import fabric_manager

MAP = fake.H100_WP12736_MAP


class FakeFmpmFaceTest(test.TestCase):
    """The fake's fmpm prints and exits as
    doc/source/reference/nvidia-facts.rst (section 3) records."""

    def setUp(self):
        super().setUp()
        self.fm = self.useFixture(fake_fm.FabricManagerFixture(MAP)).fm

    def fmpm(self, *args):
        return subprocess.run([self.fm.fmpm_path] + list(args),
                              capture_output=True, text=True, timeout=30)

    def test_list_layout(self):
        proc = self.fmpm('-l')
        self.assertEqual(0, proc.returncode, proc.stderr)
        lines = proc.stdout.splitlines()
        self.assertEqual(['{', '   "maxNumPartitions" : 15,',
                          '   "numPartitions" : 15,',
                          '   "partitionInfo" : [', '      {',
                          '         "gpuInfo" : [', '            {',
                          '               "maxNumNvLinks" : 18,'],
                         lines[:8])
        self.assertEqual(['   "version" : 16909068', '}'], lines[-2:])
        self.assertTrue(proc.stdout.endswith('}\n'))
        data = json.loads(proc.stdout)
        single = data['partitionInfo'][7]
        self.assertEqual({'partitionId': 7, 'numGpus': 1, 'isActive': 0},
                         {k: single[k] for k in ('partitionId', 'numGpus',
                                                 'isActive')})
        self.assertEqual({'maxNumNvLinks': 0, 'numNvLinksAvailable': 0,
                          'nvlinkLineRateMBps': 26562,
                          'pciBusId': '00000000:00:00.0', 'physicalId': 1,
                          'uuid': ''}, single['gpuInfo'][0])

    def test_nvidia_smi_prints_the_current_driver_layout(self):
        # Drivers 565/570 (nvidia-facts.rst section 5): "Module Id" in a
        # "Platform Info" sub-block; the R525-era top-level "Module ID"
        # line only on request.
        address = sorted(MAP)[0]
        header = 'GPU 00000000:%s' % address.split(':', 1)[1].upper()
        for layout, expected in (
                (None, ['    Platform Info',
                        '        Module Id                         : %d'
                        % MAP[address]]),
                ('r525', ['    Module ID                             : %d'
                          % MAP[address]])):
            if layout:
                self.fm.update(nvidia_smi_layout=layout)
            proc = subprocess.run([self.fm.nvidia_smi_path, '-q'],
                                  capture_output=True, text=True,
                                  timeout=30)
            self.assertEqual(0, proc.returncode, proc.stderr)
            lines = proc.stdout.splitlines()
            block = lines[lines.index(header):]
            block = block[:block.index('')]
            for line in expected:
                self.assertIn(line, block)
            self.assertEqual(1, sum('Module I' in line for line in block))

    def test_unknown_nvidia_smi_layout_is_refused(self):
        err = self.assertRaises(
            ValueError, fake.FakeFabricManager.create,
            self.useFixture(fixtures.TempDir()).path, MAP,
            nvidia_smi_layout='r999')
        self.assertIn("'r999'", str(err))
        self.assertIn('current, r525', str(err))

    def test_statuses_and_stdout_lines(self):
        cases = [
            (('-a', '3'), 0, ''),
            (('-a', '3'), 249, 'Failed to activate partition. fmReturn: -7'),
            (('-a', '1'), 249, 'Failed to activate partition. fmReturn: -7'),
            (('-d', '4'), 252,
             'Failed to deactivate partition. fmReturn: -4'),
            (('-a', '20'), 255,
             'Failed to activate partition. fmReturn: -1'),
            (('-a', '64'), 255, 'Invalid Partition ID.'),
            (('--set-activated-list', '3,70'), 255,
             'Invalid partition Id 70 was given.'),
            (('-v',), 0, '1.0.1'),
            (('-l', '--hostname', '10.1.1.1'), 247,
             'Failed to connect to Fabric Manager instance.'),
        ]
        for args, status, out in cases:
            proc = self.fmpm(*args)
            self.assertEqual((status, out), (proc.returncode,
                                             proc.stdout.strip()), args)

    def test_argument_errors_go_to_stderr(self):
        for args, status in ((('-a',), 1), (('--hostname',), 1),
                             (('-d',), 255), (('--bogus',), 255)):
            proc = self.fmpm(*args)
            self.assertEqual(status, proc.returncode, args)
            self.assertEqual('', proc.stdout)
            self.assertNotEqual('', proc.stderr)


class ClientTest(test.TestCase):

    def setUp(self):
        super().setUp()
        self.fm = self.useFixture(fake_fm.FabricManagerFixture(MAP)).fm
        self.client = fabric_manager.FabricManagerClient(self.fm.fmpm_path)

    def test_list_activate_deactivate(self):
        partitions = self.client.list_partitions()
        self.assertEqual(list(range(15)), [p.id for p in partitions])
        self.assertEqual(frozenset({1, 3}), partitions[3].module_ids)
        self.assertFalse(any(p.active for p in partitions))
        self.client.activate(5)
        self.assertEqual({5}, self.fm.active())
        self.assertTrue(self.client.list_partitions()[5].active)
        self.client.deactivate(5)
        self.assertEqual(set(), self.fm.active())

    def test_errors_are_typed(self):
        self.client.activate(3)
        cases = [
            (lambda: self.client.activate(3), exception.FabricManagerInUse),
            (lambda: self.client.activate(0), exception.FabricManagerInUse),
            (lambda: self.client.deactivate(4),
             exception.FabricManagerNotActive),
            (lambda: self.client.activate(30),
             exception.FabricManagerBadParam),
        ]
        for call, error in cases:
            self.assertRaises(error, call)
        err = self.assertRaises(exception.FabricManagerInUse,
                                self.client.activate, 1)
        self.assertIn('fmReturn: -7', str(err))
        self.assertIn('status 249', str(err))

    def test_bad_ids_refused_before_running_fmpm(self):
        for bad in (-1, 64, '3', True):
            self.assertRaises(exception.FabricManagerBadParam,
                              self.client.activate, bad)
        self.assertRaises(exception.FabricManagerBadParam,
                          self.client.set_activated_list, [3, 3])
        self.assertEqual([], self.fm.calls())

    def test_daemon_states(self):
        self.fm.stop()
        self.assertRaises(exception.FabricManagerConnectionInvalid,
                          self.client.list_partitions)
        self.fm.start(initializing=True)
        self.assertRaises(exception.FabricManagerNotConfigured,
                          self.client.activate, 3)
        self.fm.update(daemon='ready', fabric_mode=0)
        self.assertRaises(exception.FabricManagerNotSupported,
                          self.client.list_partitions)

    def test_restart_keeps_active_set_only_after_replay(self):
        self.client.activate(3)
        self.client.activate(6)
        self.fm.stop()
        # While FM is down the partitions keep forwarding.
        self.assertEqual({3, 6}, self.fm.active())
        self.fm.start(restart=True)
        self.assertRaises(exception.FabricManagerNotConfigured,
                          self.client.list_partitions)
        self.client.set_activated_list([3])
        self.assertEqual({3}, self.fm.active())
        self.assertEqual([3], [p.id for p in self.client.list_partitions()
                               if p.active])
        # Outside restart mode the fake refuses the call.
        self.assertRaises(exception.FabricManagerNotSupported,
                          self.client.set_activated_list, [3])

    def test_restart_window_expiry_stops_fm(self):
        self.fm.start(restart=True, window=0)
        self.assertRaises(exception.FabricManagerConnectionInvalid,
                          self.client.set_activated_list, [])

    def test_normal_start_clears_active_set(self):
        self.client.activate(0)
        self.fm.stop()
        self.fm.start()
        self.assertEqual(set(), self.fm.active())

    def test_injected_faults(self):
        for code, error in ((fake.NVLINK_ERROR,
                             exception.FabricManagerNVLinkError),
                            (fake.TIMEOUT, exception.FabricManagerTimeout),
                            (fake.GENERIC_ERROR,
                             exception.FabricManagerError)):
            self.fm.inject_fault('activate', code)
            self.assertRaises(error, self.client.activate, 3)
        self.assertEqual(set(), self.fm.active())
        self.client.activate(3)
        self.assertEqual({3}, self.fm.active())

    def test_fm_stopping_after_a_fault(self):
        self.fm.inject_fault('list', fake.GENERIC_ERROR, stop_after=True)
        self.assertRaises(exception.FabricManagerError,
                          self.client.list_partitions)
        self.assertRaises(exception.FabricManagerConnectionInvalid,
                          self.client.activate, 3)

    def test_slow_fmpm_times_out(self):
        self.fm.update(delay=5)
        client = fabric_manager.FabricManagerClient(self.fm.fmpm_path,
                                                    timeout=0.5)
        err = self.assertRaises(exception.FabricManagerTimeout,
                                client.list_partitions)
        self.assertIn('0.5s', str(err))

    def test_missing_fmpm(self):
        client = fabric_manager.FabricManagerClient('/nonexistent/fmpm')
        err = self.assertRaises(exception.FabricManagerError,
                                client.list_partitions)
        self.assertIn('/nonexistent/fmpm', str(err))

    def test_failed_devices(self):
        self.assertEqual(fabric_manager.FailedDevices(),
                         self.client.failed_devices())
        self.fm.fail_nvlinks(gpus=('0000:86:00.0',),
                             switches=('0000:05:00.0', '0000:06:00.0'))
        failed = self.client.failed_devices()
        self.assertEqual({'0000:86:00.0': (0, 1)}, dict(failed.gpus))
        self.assertEqual(['0000:05:00.0', '0000:06:00.0'],
                         sorted(failed.switches))
        for bad in ('nope', '{"gpuInfo": [{"pciBusId": "zz"}]}',
                    '{"switchInfo": [{}]}'):
            self.assertRaises(exception.FabricManagerError,
                              fabric_manager.parse_failed_devices, bad)

    def test_malformed_list(self):
        for text in ('not json', '{}', '{"partitionInfo": [{}]}'):
            self.assertRaises(exception.FabricManagerError,
                              fabric_manager.parse_partitions, text)
