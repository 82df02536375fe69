"""Messaging between the nova services over oslo.messaging.

One transport per process, created by :func:`init`. The default
``[DEFAULT]transport_url`` is ``fake:/``: oslo.messaging's in-memory
driver, which delivers calls and casts between threads of one process (the
all-in-one ``nova-all`` and the tests). A deployment of separate processes
sets ``transport_url = rabbit://user:password@host:5672/``.

Servers dispatch with oslo.messaging's threading executor (services use
plain threads, never eventlet). Request contexts cross the wire as dicts
(``RequestContext.to_dict`` / ``from_dict``), with their ``request_id``
and ``global_request_id``; the receiving handler runs with the rebuilt
context as its thread's current one, so its log lines, its own RPC calls
(given that context) and its Placement requests carry the same ids.
Exceptions from
``nova.exception`` raised by an endpoint are re-raised in the caller as the
same class, so callers can ``except exception.NoValidHost``.

Each service's RPC API is versioned (MAJOR.MINOR, history in its
``rpcapi`` module). Its manager serves the API's current version (its
``target``): oslo.messaging refuses a message of another major version or
a newer minor one, answering UnsupportedVersion. A client sends each
method at the version that introduced it, capped by
``[upgrade_levels]<service>`` (see :class:`VersionedClient`).

A server dispatches to its endpoints' public methods except those marked
:func:`local_only`: steps a manager offers the other modules of its
service in-process (e.g. ``nova.compute.repair.Compute``), which are no
part of its RPC API.
"""

import threading

from oslo_config import cfg
import oslo_messaging
from oslo_messaging import conffixture as messaging_conffixture

from nova import context as nova_context
from nova import exception

DEFAULT_TRANSPORT_URL = 'fake:/'
CONTROL_EXCHANGE = 'nova'
# Modules whose exceptions are rebuilt as their own class on the caller's
# side instead of oslo.messaging's generic RemoteError.
ALLOWED_EXMODS = ['nova.exception']
# A long call (a build, a scheduling decision) whose peer sends no
# heartbeat for this long fails: the peer is considered gone (on drivers
# with heartbeats, e.g. RabbitMQ; the peer heartbeats while it handles
# the call), long before the call's own timeout.
CALL_MONITOR_TIMEOUT = 60

_lock = threading.Lock()
TRANSPORT: oslo_messaging.Transport | None = None


def set_defaults(conf: cfg.ConfigOpts) -> None:
    """Register oslo.messaging's [DEFAULT] options with nova's defaults.

    oslo.messaging only registers its options when a transport is made;
    registering them here lets nova default ``transport_url`` to the
    in-process driver before the config is read.
    """
    oslo_messaging.set_transport_defaults(control_exchange=CONTROL_EXCHANGE)
    # Constructing (not setting up) ConfFixture registers every option
    # oslo.messaging reads, on ``conf``. Plain registration would miss
    # [oslo_messaging_tracing], which oslo.messaging registers only on the
    # global CONF although clients read it from their own conf.
    messaging_conffixture.ConfFixture(conf)
    conf.set_default('transport_url', DEFAULT_TRANSPORT_URL)


def init(conf: cfg.ConfigOpts) -> None:
    """Create the process's transport from ``conf`` (once).

    Calling it again while a transport exists is a no-op, so every service
    of an all-in-one process may call it.
    """
    global TRANSPORT
    with _lock:
        if TRANSPORT is not None:
            return
        set_defaults(conf)
        TRANSPORT = oslo_messaging.get_rpc_transport(
            conf, allowed_remote_exmods=ALLOWED_EXMODS)


def cleanup() -> None:
    """Close the transport (for service shutdown and tests)."""
    global TRANSPORT
    with _lock:
        if TRANSPORT is not None:
            TRANSPORT.cleanup()
            TRANSPORT = None


def _transport() -> oslo_messaging.Transport:
    if TRANSPORT is None:
        raise RuntimeError('nova.rpc.init(conf) must be called before '
                           'RPC servers or clients are made')
    return TRANSPORT


class RequestContextSerializer(oslo_messaging.Serializer):
    """Send contexts as dicts and rebuild nova RequestContexts on receipt.

    Arguments and results pass unchanged: the boot path only sends JSON
    types (strings, lists, dicts).
    """

    def serialize_entity(self, ctxt, entity):
        return entity

    def deserialize_entity(self, ctxt, entity):
        return entity

    def serialize_context(self, ctxt) -> dict:
        return ctxt.to_dict()

    def deserialize_context(self, ctxt: dict):
        context = nova_context.RequestContext.from_dict(ctxt)
        # The executor deserializes in the thread that runs the handler.
        context.update_store()
        return context


def local_only(method):
    """Mark a public method of an RPC endpoint as not served over RPC: a
    step its service calls in-process, no part of the endpoint's
    versioned API."""
    method.rpc_local_only = True
    return method


class _AccessPolicy(oslo_messaging.DefaultRPCAccessPolicy):
    """Dispatch neither private methods (oslo.messaging's default) nor
    those marked :func:`local_only`."""

    def is_allowed(self, endpoint, method: str) -> bool:
        return super().is_allowed(endpoint, method) and not getattr(
            getattr(endpoint, method, None), 'rpc_local_only', False)


def get_server(topic: str, server: str,
               endpoints: list) -> oslo_messaging.MessageHandlingServer:
    """An RPC server for ``topic`` on ``server`` (not started).

    It receives messages sent to the topic and those sent to this server
    by name. Endpoint methods are called as ``method(context, **kwargs)``;
    private and :func:`local_only` ones are not served.
    """
    target = oslo_messaging.Target(topic=topic, server=server)
    # The executor defaults to 'threading' unless eventlet monkey patched
    # the process, which nova never does.
    return oslo_messaging.get_rpc_server(
        _transport(), target, endpoints,
        serializer=RequestContextSerializer(), access_policy=_AccessPolicy)


def get_client(topic: str, server: str | None = None,
               timeout: float | None = None,
               call_monitor_timeout: float | None = None,
               version_cap: str | None = None
               ) -> oslo_messaging.RPCClient:
    """An RPC client for ``topic`` (optionally one ``server`` of it).

    ``timeout`` bounds a call (None: ``[DEFAULT]rpc_response_timeout``).
    ``call_monitor_timeout`` makes long calls fail early when the server
    stops sending heartbeats (a dead peer), on drivers that support them.
    ``version_cap``: the newest message version it may send.
    """
    target = oslo_messaging.Target(topic=topic, server=server)
    return oslo_messaging.get_rpc_client(
        _transport(), target, timeout=timeout,
        call_monitor_timeout=call_monitor_timeout, version_cap=version_cap,
        serializer=RequestContextSerializer())


def endpoint_target(version: str) -> oslo_messaging.Target:
    """The ``target`` of a manager serving its RPC API at ``version``."""
    return oslo_messaging.Target(version=version)


class VersionedClient:
    """The client of one service's versioned RPC API.

    ``service`` (``compute``, ``conductor``, ``scheduler``) is the topic
    and names the ``[upgrade_levels]`` option that caps the versions sent.
    """

    def __init__(self, conf: cfg.ConfigOpts, service: str) -> None:
        self.service = service
        self.version_cap: str | None = conf.upgrade_levels[service]
        self._client = get_client(service, version_cap=self.version_cap)

    def can_send_version(self, version: str) -> bool:
        """Whether the cap allows messages of ``version``."""
        return self._client.can_send_version(version)

    def prepare(self, method: str, version: str, **kwargs):
        """A call context sending ``method`` at ``version``; ``kwargs`` as
        oslo.messaging's ``prepare`` (server, timeout, ...).

        Raises RPCVersionCapped when the cap is below ``version``: the
        services at the cap would refuse the message.
        """
        if not self.can_send_version(version):
            raise exception.RPCVersionCapped(
                service=self.service, method=method, version=version,
                cap=self.version_cap)
        return self._client.prepare(version=version, **kwargs)
