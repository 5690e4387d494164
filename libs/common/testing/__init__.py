"""Hand-written fakes of libs/common ports, for unit tests; each has a contract test against the real one."""

from libs.common.testing.contexts import handler_context
from libs.common.testing.fakes import FakeUnitOfWork

__all__ = ["FakeUnitOfWork", "handler_context"]
