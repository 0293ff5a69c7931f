"""Pins: what a workload stack records at its first `up` so the next one deploys the same thing (pure).

:mod:`.image_pins` (the images named by a tag, and the manifests with the recorded digests put in),
:mod:`.model_revision` (the model revision pinned to a commit, with the Hub's checksum of each file)
and :mod:`.mirror_formats` (which files of the model repository the mirror Job copies). Asking the
registries for the digests is :mod:`llmctl.infra.workload.prepare.digests`.
"""
