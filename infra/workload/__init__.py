"""The workload stacks: one blueprint deployed on a cluster as typed, generated Kubernetes objects.

Pure manifest builders (:mod:`.builders`, entry :func:`.manifests.build_manifests`) feed three
users with the same objects: the Pulumi component (:mod:`.component`), `llmctl render`
(:mod:`.render`) and the schedulability check `llmctl validate` (:mod:`.schedulability`).

Below the builders: :mod:`.scheduling` (what a node holds, what the pods request, the pools, the
rollout rules), :mod:`.pins` (image digests, the model revision and its files) and :mod:`.delivery`
(how the serving code and its wheels reach the pods). Above them: :mod:`.prepare` (what `up` does on
the user's machine before the stack runs) and :mod:`.access` (the pods' grants in the cache bucket).
"""
