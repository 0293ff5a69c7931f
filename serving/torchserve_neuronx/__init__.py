"""TorchServe with transformers-neuronx on Inferentia2/Trainium.

``config.py`` renders the model archive's ``model-config.yaml`` (frontend batching and the
handler's Neuron settings) and TorchServe's ``config.properties`` from a blueprint;
``handler.py`` is the custom handler (micro-batching, token streaming); the ``Dockerfile`` builds
on the pinned Neuron Deep Learning Container that still ships transformers-neuronx.
"""
