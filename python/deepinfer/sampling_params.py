"""SamplingParams: per-request sampling settings with vLLM's names and defaults.

The engine's fields (temperature ... ignore_eos) take their defaults from the one table of
sampling fields in the extension (src/deepinfer/engine/sampling_fields.cc, Defaults::kApi):
temperature 1.0 as vLLM, OpenAI and Anthropic; max_tokens 16 as vLLM. docs/sampling.md says why.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

from . import _C

_DEFAULTS = {f["name"]: f["default"] for f in _C.sampling_fields()}


@dataclass
class SamplingParams:
    """Like vllm.SamplingParams. temperature=0 is greedy; top_k <= 0 (vLLM's -1) is off."""

    n: int = 1
    temperature: float = _DEFAULTS["temperature"]
    top_p: float = _DEFAULTS["top_p"]
    top_k: int = _DEFAULTS["top_k"]
    min_p: float = _DEFAULTS["min_p"]
    max_tokens: Optional[int] = _DEFAULTS["max_tokens"]
    seed: Optional[int] = _DEFAULTS["seed"]
    stop: Optional[Union[str, List[str]]] = None
    logprobs: Optional[int] = _DEFAULTS["logprobs"]
    presence_penalty: float = _DEFAULTS["presence_penalty"]
    frequency_penalty: float = _DEFAULTS["frequency_penalty"]
    repetition_penalty: float = _DEFAULTS["repetition_penalty"]
    ignore_eos: bool = _DEFAULTS["ignore_eos"]
    speculative: bool = _DEFAULTS["speculative"]  # False: opt out of the engine's drafter
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
        """The table's fields by name (the extension converts and checks them), plus the lists."""
        out = {name: getattr(self, name) for name in _DEFAULTS}
        if self.max_tokens is None:
            out["max_tokens"] = default_max_tokens
        out["logit_bias"] = [(int(k), float(v)) for k, v in (self.logit_bias or {}).items()]
        out["stop"] = list(self.stop)
        return out
