"""Libvirt compute driver; the test:/// driver serves as fake hypervisor."""
