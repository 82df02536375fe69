"""Shared helpers of the functional tests: service set-ups, hosts,
workloads and checks that the story tests and per-package tests use."""
