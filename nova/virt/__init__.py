"""Hypervisor drivers of the compute service."""
