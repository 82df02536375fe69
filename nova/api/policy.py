"""Policy enforcement for the Compute API (oslo.policy, in-code defaults)."""

from oslo_config import cfg
from oslo_policy import policy

from nova import exception
from nova import policies


class Enforcer:
    """Checks a request context against the Compute API policy rules."""

    def __init__(self, conf: cfg.ConfigOpts):
        self._enforcer = policy.Enforcer(conf)
        self._enforcer.register_defaults(policies.list_rules())

    @staticmethod
    def _creds(context) -> dict:
        return {'user_id': context.user_id,
                'project_id': context.project_id,
                'roles': list(context.roles or []),
                'is_admin': bool(context.is_admin)}

    def allowed(self, context, rule: str,
                target: dict | None = None) -> bool:
        """True if ``context`` passes ``rule`` for ``target``."""
        target = target or {'project_id': context.project_id}
        return self._enforcer.enforce(rule, target, self._creds(context))

    def authorize(self, context, rule: str,
                  target: dict | None = None) -> None:
        """Raise PolicyNotAuthorized (403) unless ``allowed``."""
        if not self.allowed(context, rule, target):
            raise exception.PolicyNotAuthorized(action=rule)
