"""Option groups of keystoneauth1 (session, auth plugin, adapter) for the
services nova calls: registered, listed for the sample config and loaded
into an adapter the same way for each (``[placement]``, ``[glance]``,
``[nova]``)."""

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from nova.conf import groups


def register_opts(conf: cfg.ConfigOpts, group: cfg.OptGroup,
                  opts: list[cfg.Opt], service_type: str) -> None:
    """Register ``group`` with its own ``opts`` and keystoneauth1's,
    finding ``service_type`` on the internal, then public interface."""
    groups.register_group_opts(conf, group, opts)
    ks_loading.register_session_conf_options(conf, group.name)
    ks_loading.register_auth_conf_options(conf, group.name)
    ks_loading.register_adapter_conf_options(conf, group.name,
                                             include_deprecated=False)
    conf.set_default('service_type', service_type, group=group.name)
    conf.set_default('valid_interfaces', ['internal', 'public'],
                     group=group.name)


def list_opts(group: cfg.OptGroup, opts: list[cfg.Opt]) -> dict:
    """``{group: options}`` for the sample config: ``opts``, the session
    and adapter options and the password plugin's as an example."""
    every = (opts + ks_loading.get_session_conf_options() +
             ks_loading.get_auth_common_conf_options() +
             ks_loading.get_auth_plugin_conf_options('password') +
             ks_loading.get_adapter_conf_options(include_deprecated=False))
    # Deduplicate by name: plugin options overlap the common ones.
    unique = {opt.dest: opt for opt in every}
    return {group: list(unique.values())}


def load_adapter(conf: cfg.ConfigOpts, group: str, auth=None,
                 **overrides) -> ks_adapter.Adapter:
    """The adapter ``[group]`` describes; ``auth`` replaces its plugin,
    ``overrides`` its adapter options (e.g. ``endpoint_override``)."""
    if auth is None:
        auth = ks_loading.load_auth_from_conf_options(conf, group)
    session = ks_loading.load_session_from_conf_options(conf, group,
                                                        auth=auth)
    return ks_loading.load_adapter_from_conf_options(
        conf, group, session=session, auth=auth, **overrides)
