"""SamplingParams: per-request sampling settings with vLLM's names and defaults."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union


@dataclass
class SamplingParams:
    """Like vllm.SamplingParams. temperature=0 is greedy; top_k <= 0 (vLLM's -1) is off."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    max_tokens: Optional[int] = 16
    seed: Optional[int] = None
    stop: Optional[Union[str, List[str]]] = None
    logprobs: Optional[int] = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    ignore_eos: bool = False
    logit_bias: Optional[Dict[int, float]] = None
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    stop_token_ids: Optional[List[int]] = field(default=None)

    def __post_init__(self) -> None:
        if self.n != 1:
            raise ValueError(f"n={self.n}: only n=1 is supported (submit the prompt n times)")
        if self.stop is None:
            self.stop = []
        elif isinstance(self.stop, str):
            self.stop = [self.stop]
        else:
            self.stop = list(self.stop)
        if not all(isinstance(s, str) and s for s in self.stop):
            raise ValueError("stop must be a non-empty string or a list of non-empty strings")
        if self.max_tokens is not None and (not isinstance(self.max_tokens, int) or self.max_tokens < 0):
            raise ValueError(f"max_tokens={self.max_tokens!r}: must be a non-negative integer")
        if self.seed is not None and (not isinstance(self.seed, int) or self.seed < 0):
            raise ValueError(f"seed={self.seed!r}: must be a non-negative integer")
        if self.logprobs is not None and (not isinstance(self.logprobs, int) or self.logprobs < 0):
            raise ValueError(f"logprobs={self.logprobs!r}: must be a non-negative integer")
        if self.top_k < 0:
            self.top_k = 0  # vLLM spells "off" as -1
        if self.stop_token_ids:
            raise ValueError("stop_token_ids is not supported yet; use stop strings")
        if self.include_stop_str_in_output:
            raise ValueError("include_stop_str_in_output is not supported yet")
        # Ranges (temperature, top_p, penalties ...) are checked by the engine at admission,
        # which raises ValueError with its own message.

    def _to_engine(self, default_max_tokens: int) -> dict:
        return {
            "temperature": float(self.temperature),
            "top_p": float(self.top_p),
            "top_k": int(self.top_k),
            "min_p": float(self.min_p),
            "repetition_penalty": float(self.repetition_penalty),
            "frequency_penalty": float(self.frequency_penalty),
            "presence_penalty": float(self.presence_penalty),
            "seed": self.seed,
            "logprobs": self.logprobs,
            "logit_bias": [(int(k), float(v)) for k, v in (self.logit_bias or {}).items()],
            "max_tokens": default_max_tokens if self.max_tokens is None else int(self.max_tokens),
            "stop": list(self.stop),
            "ignore_eos": bool(self.ignore_eos),
        }
