"""The engine-independent half of the OpenAI-compatible serving apps (serving/ray_cpu, serving/ray_neuronx).

- :mod:`.protocol`: OpenAI request/response models and the API error type
- :mod:`.engine`: the small :class:`~.engine.Engine` protocol, sampling settings and the threaded
  token-streaming base that the CPU and Neuron engines build on
- :mod:`.decode`: incremental detokenisation; :mod:`.stop`: stop-sequence matching
- :mod:`.limits`: prompt-length and max-token limits with clear 4xx errors
- :mod:`.sse`: server-sent events; :mod:`.metrics`: Prometheus metrics
- :mod:`.api`: the FastAPI routes; :mod:`.ingress`: the Ray Serve deployment around them
- :mod:`.overload`: request-size limit, bounded queue (429 + Retry-After) and draining, before parsing
- :mod:`.auth`: the API-key check (`Authorization: Bearer`, from `LLMCTL_API_KEY` or the `api_key` arg)
- :mod:`.deps`: lazy imports of optional packages with a clear error
"""
