"""A Nova-architecture compute service with in-tree PCI device groups."""
