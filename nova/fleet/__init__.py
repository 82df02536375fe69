"""Fleet views and plans: what the operator reads about many hosts at once.

The board (each host's device groups, their holders and why a group is
not offered), its SVG and HTML picture, the fleet's Prometheus gauges and
the defragmentation planner. They read the database (devices, servers,
which computes are up) and never write it.

The package sits above the PCI model and tracker (``nova.pci``) and the
database, and below the scheduler, the conductor and the commands that
show or act on these views; ``nova.tests.unit.test_layers`` enforces it.
"""
