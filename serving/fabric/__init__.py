"""The fabric preflight: an all-reduce across a replica's nodes before the model loads.

- :mod:`.probe` is the program the preflight Job's pods run (standard library and torch only, so it
  is shipped to the pod as one file and needs nothing of llmctl in the image): `torch.distributed`
  all_reduce over doubling sizes, rows in nccl-tests' format, NCCL's transport lines and one JSON
  summary line.
- :mod:`.report` reads that output, or the real `all_reduce_perf` output of nccl-tests, into one
  typed result (on the user's machine: the lifecycle's check, `infra/lifecycle/fabric.py`).
"""
