"""[image_cache] options: the compute's cache of base images under
``instances_path``, as upstream names them."""

from oslo_config import cfg

from nova.conf import groups

image_cache_group = cfg.OptGroup(
    'image_cache', title='Image cache options',
    help='The base images a compute downloads from Glance, kept under '
         '$instances_path/$subdirectory_name; each guest boots from a '
         'qcow2 overlay of one.')

image_cache_opts = [
    cfg.IntOpt('manager_interval',
               default=2400, min=-1,
               help='Seconds between runs of the image cache manager, '
                    'which removes unused base images; 0 runs it at the '
                    'default periodic interval, -1 never.'),
    cfg.StrOpt('subdirectory_name',
               default='_base',
               help='Directory under instances_path holding cached base '
                    'images.'),
    cfg.BoolOpt('remove_unused_base_images',
                default=True,
                help='Whether the image cache manager removes base images '
                     'no guest on this host uses any more.'),
    cfg.IntOpt('remove_unused_original_minimum_age_seconds',
               default=24 * 3600, min=0,
               help='How long, in seconds, an unused base image stays '
                    'before it is removed.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    groups.register_group_opts(conf, image_cache_group, image_cache_opts)


def list_opts() -> dict:
    return {image_cache_group: image_cache_opts}
