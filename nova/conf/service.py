"""[DEFAULT] options of every nova service: liveness reporting and
shutting down."""

from oslo_config import cfg

service_opts = [
    cfg.IntOpt('report_interval',
               default=10,
               min=1,
               help='Seconds between two reports of a service that it is '
                    'up (its heartbeat: ``last_seen_up`` and '
                    '``report_count`` of its services row). Keep it well '
                    'below ``service_down_time``.'),
    cfg.IntOpt('service_down_time',
               default=60,
               min=1,
               help='A service that has not reported for this many seconds '
                    'is down: the scheduler places no instance on a down '
                    'compute and the API deletes the instances of a down '
                    'compute itself, leaving the compute to clean up its '
                    'guests when it comes back.'),
    cfg.IntOpt('graceful_shutdown_timeout',
               default=60,
               min=0,
               help='Seconds a service told to stop (SIGTERM or SIGINT) '
                    'gives the API requests and RPC messages it is '
                    'handling to finish, after it stopped taking new ones; '
                    'a service still busy then exits with status 1 '
                    'anyway. 0 waits as long as they take. The same '
                    'option and meaning as in oslo.service.'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(service_opts)


def list_opts() -> dict:
    return {'DEFAULT': service_opts}
