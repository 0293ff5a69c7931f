"""Ray Serve on Inferentia2/Trainium: the shared OpenAI app around transformers-neuronx.

Import path for Serve configs: ``llmctl.serving.ray_neuronx.app:app_builder``.
:mod:`llmctl.serving.neuronx.settings` (shared with torchserve_neuronx) derives everything that
needs no hardware (tp degree, amp, n_positions, context-length buckets, split-checkpoint and
compile-cache paths, environment) from the blueprint; :mod:`llmctl.serving.neuronx.engine` imports
transformers-neuronx only when a replica starts.
"""
