"""Fake hosts and host tools, for the nova-all demo and the tests only.

Nothing here talks to real hardware. ``host`` generates fake GPU hosts
(node XML for libvirt's ``test:///`` driver and the ``[pci]`` options
written for them); ``fabric_manager`` is a fake NVIDIA Fabric Manager with
the ``fmpm`` and ``nvidia-smi`` command lines, which nova-all gives its
generated hosts and the tests start beside libvirt's ``test:///`` driver.
The package lives in ``nova``, not in ``nova.tests``, because nova-all
ships it and production code must not import test code; among production
modules only ``nova.cmd.all`` and ``nova.demo`` may import it
(``nova.tests.unit.test_layers`` checks that).
"""
