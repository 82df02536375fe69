"""A Nova-architecture compute service with in-tree PCI device groups."""

import warnings

# Libraries below (futurist, oslo.service) import eventlet only to detect
# whether it is in use; nova never uses it, so its deprecation notice is
# noise for operators.
warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')

from oslo_service import backend as _service_backend  # noqa: E402

# Nova services use plain threads. oslo.messaging imports oslo.service,
# whose default backend is eventlet; pick its threading backend before
# anything loads the eventlet one. (Tools that load oslo.messaging before
# nova, such as oslo-config-generator, already chose; they run no service.)
if _service_backend.get_backend_type() is None:
    _service_backend.init_backend(_service_backend.BackendType.THREADING)
