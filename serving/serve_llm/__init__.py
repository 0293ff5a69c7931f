"""Ray Serve LLM, shared by every runtime that serves through it (today ray_vllm): the ``LLMConfig``
fields that do not depend on the engine (model loading, replicas and autoscaling, shedding, drain,
the GPU type) and the OpenAI app around the configs. A runtime adds its engine's kwargs, environment
and hooks. Runs in pods; Ray is imported only when the app is built."""
