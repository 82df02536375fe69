"""The image service (Glance): its client (nova-all's Glance is
:mod:`nova.cmd.glance_service`)."""
