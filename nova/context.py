"""Request contexts: who is calling, plus the database transaction state.

The oslo.db enginefacade keeps the current session on the context, so every
``nova.db.api`` function takes a context as its first argument and nested
calls made with the same context join one transaction.
"""

from oslo_context import context as oslo_context
from oslo_db.sqlalchemy import enginefacade


@enginefacade.transaction_context_provider
class RequestContext(oslo_context.RequestContext):
    """Identity of one request (user, project, admin flag, request id)."""

    def __init__(self, user_id: str | None = None,
                 project_id: str | None = None,
                 is_admin: bool = False,
                 request_id: str | None = None,
                 **kwargs) -> None:
        # request_id defaults to a fresh 'req-<uuid>' in oslo.context.
        super().__init__(user_id=user_id, project_id=project_id,
                         is_admin=is_admin, request_id=request_id, **kwargs)


def get_admin_context() -> RequestContext:
    """Return a context for internal work done by the services themselves.

    It is not stored as the thread's current context, so background tasks
    do not overwrite the context of a request being served.
    """
    return RequestContext(is_admin=True, overwrite=False)
