"""Triton Inference Server with the vLLM backend.

The container (``Dockerfile``) is NVIDIA's pinned ``tritonserver:<release>-vllm-python-py3`` image
plus a model repository rendered from the blueprint by :func:`render_model_repository`:

    <model_name>/config.pbtxt   backend "vllm", one model instance, decoupled (streaming) transaction policy
    <model_name>/1/model.json   vLLM engine args (model id, tp size, max_model_len, dtype, ...)

Triton serves it on 8000 (HTTP, including the ``generate``/``generate_stream`` extension),
8001 (gRPC) and 8002 (Prometheus metrics). ``client_example.py`` shows a streaming request.
"""
