"""Ray Serve on Inferentia2/Trainium: the shared OpenAI app around transformers-neuronx.

Import path for Serve configs: ``llmctl.serving.ray_neuronx.app:app_builder``.
:mod:`.settings` derives everything that needs no hardware (tp degree, amp, n_positions,
context-length buckets, split-checkpoint and compile-cache paths, environment) from the
blueprint; :mod:`.engine` imports transformers-neuronx only when a replica starts.
"""
