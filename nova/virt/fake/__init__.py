"""Fakes of host tools, for the nova-all demo and the tests only.

Nothing here talks to real hardware. ``fabric_manager`` is a fake NVIDIA
Fabric Manager with the ``fmpm`` and ``nvidia-smi`` command lines, which
nova-all gives its generated GPU hosts (``nova.virt.libvirt.fakehost``) and
the tests start beside libvirt's ``test:///`` driver. It lives in the
production package, not in ``nova.tests``, because nova-all ships it and
production code must not import test code.
"""
