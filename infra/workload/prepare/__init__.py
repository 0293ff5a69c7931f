"""What `up` does on the user's machine before the workload stack runs: the serving code's delivery
decided, built and uploaded (:mod:`.delivery`), and the images pinned by digest (:mod:`.digests`).
Both call outside systems (S3, ECR, Docker, the registries); the rules they apply are in
:mod:`llmctl.infra.workload.delivery` and :mod:`llmctl.infra.workload.pins`."""
