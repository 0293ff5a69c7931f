"""Scheduling facts: what a node can hold (:mod:`.capacity`), what a workload's pods request and how
many fit (:mod:`.pods`), the node pools a workload can land on (:mod:`.pool_facts`) and what the
controllers do with a change to a deployed workload (:mod:`.rollout`). Pure; below the builders.

The check that uses them on a workload's manifests, `llmctl validate`, is
:mod:`llmctl.infra.workload.schedulability` (above the builders, so beside them, not in here).
"""
