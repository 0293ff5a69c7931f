"""Delivery: how the serving code and its dependencies reach a workload's pods (pure, but for the wheel
build's cache).

:mod:`.serving_code` (the three deliveries, image, wheel or ConfigMap, and the pod pieces each needs),
:mod:`.wheelhouse` (a runtime lock's wheels in the cache bucket), :mod:`.wheelhouse_pods` (the pod
pieces that install one), :mod:`.outside_wheels` (the wheels a lock leaves out), :mod:`.ui_packages`
(a UI pod's packages) and :mod:`.wheel_cache` (wheels built from a checkout, kept by fingerprint).
`up`'s decision among them, with its uploads, is :mod:`llmctl.infra.workload.prepare.delivery`.
"""

# builders/ imports the pod pieces by the package's name (`from llmctl.infra.workload.delivery import
# with_app`), as it did when they were one module; that line goes when its imports name .serving_code
# (builders/ is edited on another branch of issue 54 at the same time).
from llmctl.infra.workload.delivery.serving_code import *  # noqa: F403
