"""Which nova services are up, from the heartbeats in the services table."""
