"""Offline batched inference with DeepInfer's vLLM-style API (after `pip install .`).

    python3 examples/offline_inference.py [--model PATH_OR_NAME]
"""
import argparse

from deepinfer import LLM, SamplingParams


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None, help=".gguf file, HF directory or catalogue name "
                                                 "(default: smollm2-135m-instruct)")
    args = ap.parse_args()

    prompts = [
        "Hello, my name is",
        "The president of the United States is",
        "The capital of France is",
        "The future of AI is",
    ]
    sampling_params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=32, seed=0)

    llm = LLM(model=args.model)
    # All prompts run together through one engine; results come back in input order.
    outputs = llm.generate(prompts, sampling_params)
    for output in outputs:
        print(f"Prompt: {output.prompt!r}, Generated text: {output.outputs[0].text!r}")

    # Chat: the model's chat template is applied.
    conversation = [{"role": "user", "content": "Give me one tip for writing clear code."}]
    reply = llm.chat(conversation, SamplingParams(temperature=0, max_tokens=64))
    print("Chat reply:", reply[0].outputs[0].text)

    # Streaming: text deltas as they are produced.
    print("Streamed: ", end="", flush=True)
    for delta in llm.generate_stream("Count from one to five:", SamplingParams(temperature=0, max_tokens=24)):
        print(delta, end="", flush=True)
    print()


if __name__ == "__main__":
    main()
