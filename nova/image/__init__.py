"""The image service (Glance): its client, and the Glance nova-all runs."""
