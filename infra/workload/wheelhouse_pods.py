"""The old name of :mod:`llmctl.infra.workload.delivery.wheelhouse_pods`, kept while builders/ imports it by that name.

builders/ is edited on another branch of issue 54 at the same time; when its imports name
`llmctl.infra.workload.delivery.wheelhouse_pods`, this file goes. It is the same module object, not a copy: what a
test patches on one is seen through the other.
"""

import sys
from typing import TYPE_CHECKING

from llmctl.infra.workload.delivery import wheelhouse_pods as _moved

if TYPE_CHECKING:
    from llmctl.infra.workload.delivery.wheelhouse_pods import *  # noqa: F403
else:
    sys.modules[__name__] = _moved
