"""Ray Serve LLM (vLLM) configured from a blueprint, for NVIDIA GPUs and for Neuron (vllm-neuron).

Import path for Serve configs: ``llmctl.serving.ray_vllm.app:app_builder``. No server is
written here: Ray Serve's ``build_openai_app`` provides the OpenAI routes; this package only
translates the blueprint into an ``LLMConfig``.
"""
