"""Clients the scheduler and compute use to reach other services."""
