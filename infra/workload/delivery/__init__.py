"""Delivery: how the serving code and its dependencies reach a workload's pods (pure, but for the wheel
build's cache).

:mod:`.serving_code` (the three deliveries, image, wheel or ConfigMap, and the pod pieces each needs),
:mod:`.wheel_parts` (the wheel split into ConfigMaps under the API server's limit, joined in the pod),
:mod:`.wheelhouse` (a runtime lock's wheels in the cache bucket), :mod:`.wheelhouse_pods` (the pod
pieces that install one), :mod:`.outside_wheels` (the wheels a lock leaves out), :mod:`.ui_packages`
(a UI pod's packages) and :mod:`.wheel_cache` (wheels built from a checkout, kept by fingerprint).
`up`'s decision among them, with its uploads, is :mod:`llmctl.infra.workload.prepare.delivery`.
"""
