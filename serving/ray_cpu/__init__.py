"""Ray Serve on CPU: the shared OpenAI app around a Hugging Face transformers engine.

Import path for Serve configs: ``llmctl.serving.ray_cpu.app:app_builder``.
"""
