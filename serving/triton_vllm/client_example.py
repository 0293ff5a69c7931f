"""A small client for Triton's generate extension (vLLM backend): streams one answer.

kubectl port-forward svc/<release>-triton 8000:8000
python -m llmctl.serving.triton_vllm.client_example --model llama2_triton_vllm_gpu "What is Inferentia?"
"""

from __future__ import annotations

import argparse
import json

import httpx


def stream(base_url: str, model: str, prompt: str, max_tokens: int = 128) -> str:
    """POST ``/v2/models/<model>/generate_stream`` and print the text as it arrives."""
    body = {
        "text_input": prompt,
        "stream": True,
        "sampling_parameters": json.dumps({"max_tokens": max_tokens}),
        "exclude_input_in_output": True,
    }
    parts = []
    with httpx.stream(
        "POST", f"{base_url}/v2/models/{model}/generate_stream", json=body, timeout=300
    ) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data:"):
                piece = json.loads(line[5:]).get("text_output", "")
                parts.append(piece)
                print(piece, end="", flush=True)
    print()
    return "".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt")
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument(
        "--model", required=True, help="Triton model name (the blueprint name with '_' for '-')."
    )
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    stream(args.url, args.model, args.prompt, args.max_tokens)


if __name__ == "__main__":
    main()
