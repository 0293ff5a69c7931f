"""The workload stacks: one blueprint deployed on a cluster as typed, generated Kubernetes objects.

Pure manifest builders (:mod:`.builders`, entry :func:`.manifests.build_manifests`) feed three
users with the same objects: the Pulumi component (:mod:`.component`), `llmctl render`
(:mod:`.render`) and the schedulability check `llmctl validate` (:mod:`.schedulability`).
"""
