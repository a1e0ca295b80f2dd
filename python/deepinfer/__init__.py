"""DeepInfer's Python API, shaped like vLLM's offline one:

    from deepinfer import LLM, SamplingParams
    llm = LLM()  # default model; or LLM(model="path/to/model.gguf")
    for out in llm.generate(["Hello"], SamplingParams(temperature=0, max_tokens=32)):
        print(out.outputs[0].text)
"""
from .llm import LLM, Tokenizer
from .outputs import CompletionOutput, Logprob, RequestOutput
from .sampling_params import SamplingParams

__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "Logprob", "Tokenizer"]
