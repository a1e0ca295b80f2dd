"""LLM: one model and one engine; generate/chat run every prompt concurrently (continuous
batching) and return results in input order; generate_stream yields text deltas."""
from __future__ import annotations

import os
import threading
from collections import deque
from typing import Dict, Iterator, List, Optional, Sequence, Union

from . import _C
from .outputs import CompletionOutput, Logprob, RequestOutput
from .sampling_params import SamplingParams

PromptType = Union[str, Dict, List[int]]
# Without a max_tokens the engine stops at end of sequence or at this many tokens.
_UNLIMITED_MAX_TOKENS = 1 << 20


class Tokenizer:
    """The model's tokenizer, with the Hugging Face method names."""

    def __init__(self, engine: "_C.Engine") -> None:
        self._engine = engine

    @property
    def eos_token_id(self) -> int:
        return self._engine.eos_token_id

    @property
    def bos_token_id(self) -> int:
        return self._engine.bos_token_id

    @property
    def vocab_size(self) -> int:
        return self._engine.vocab_size

    @property
    def chat_template(self) -> str:
        return self._engine.chat_template

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Plain text -> ids (BOS first when the model wants it); text never makes control tokens."""
        return self._engine.encode(text, add_special_tokens)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self._engine.decode(list(ids), skip_special_tokens)

    def apply_chat_template(self, messages: List[Dict[str, str]], tokenize: bool = False,
                            add_generation_prompt: bool = True, thinking: bool = False):
        """The model's chat encoding, as `deepinfer generate` and the server use it: the chat
        template, or DeepSeek-V4's own format (thinking=True opens <think>)."""
        pairs = _message_pairs(messages)
        if tokenize:
            return self._engine.encode_chat(pairs, add_generation_prompt, bool(thinking))
        return self._engine.render_chat(pairs, add_generation_prompt, bool(thinking))


def _thinking(chat_template_kwargs) -> bool:
    kwargs = dict(chat_template_kwargs or {})
    unknown = set(kwargs) - {"thinking"}
    if unknown:
        raise ValueError(f"chat_template_kwargs: unknown keys {sorted(unknown)} (known: thinking)")
    return bool(kwargs.get("thinking", False))


def _message_pairs(messages) -> List[tuple]:
    if not isinstance(messages, (list, tuple)):
        raise ValueError("messages must be a list of {'role': ..., 'content': ...} dicts")
    pairs = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise ValueError(f"messages[{i}]: expected a dict with string 'role' and 'content'")
        pairs.append((m["role"], m["content"]))
    return pairs


def _has_parts(conv) -> bool:
    return isinstance(conv, (list, tuple)) and any(
        isinstance(m, dict) and isinstance(m.get("content"), (list, tuple)) for m in conv)


def _image_source(part: Dict, where: str):
    """An image part -> ("url", data URL) or ("bytes", encoded image)."""
    kind = part.get("type")
    if kind == "image_url":
        iu = part.get("image_url")
        url = iu.get("url") if isinstance(iu, dict) else iu
        if not isinstance(url, str):
            raise ValueError(f"{where}.image_url: expected a data: URL string or {{'url': ...}}")
        if isinstance(iu, dict) and iu.get("detail", "auto") not in ("auto", "low", "high"):
            raise ValueError(f"{where}.image_url.detail must be auto, low or high")
        return ("url", url)
    # {"type": "image", "image": bytes | path} or {"type": "image", "path": path}
    img = part.get("image", part.get("path"))
    if isinstance(img, (bytes, bytearray, memoryview)):
        return ("bytes", bytes(img))
    if isinstance(img, (str, os.PathLike)):
        try:
            with open(img, "rb") as f:
                return ("bytes", f.read())
        except OSError as e:
            raise ValueError(f"{where}: cannot read image file {os.fspath(img)!r}: {e.strerror}") from None
    raise ValueError(f"{where}: an image part needs 'image' (bytes or a file path) or 'path', "
                     f"got {type(img).__name__}")


def _part_messages(messages) -> List[tuple]:
    """Messages whose content may be a list of OpenAI-style parts -> [(role, [(kind, payload)])]."""
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ValueError(f"messages[{i}]: expected a dict with a string 'role'")
        content = m.get("content")
        if isinstance(content, str):
            out.append((m["role"], [("text", content)]))
            continue
        if not isinstance(content, (list, tuple)):
            raise ValueError(f"messages[{i}].content: expected a string or a list of parts")
        parts = []
        for j, part in enumerate(content):
            where = f"messages[{i}].content[{j}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                parts.append(("text", part["text"]))
            elif kind in ("image_url", "image"):
                parts.append(_image_source(part, where))
            else:
                raise ValueError(f"{where}: a part must be {{'type': 'text', 'text'}}, {{'type': 'image_url', "
                                 f"'image_url': {{'url': 'data:...'}}}} or {{'type': 'image', 'image': bytes or path}}")
        out.append((m["role"], parts))
    return out


class _Pending:
    """What one request has produced so far."""

    def __init__(self, index: int, prompt: Optional[str], prompt_ids: List[int], want_logprobs: bool):
        self.index = index
        self.prompt = prompt
        self.prompt_ids = prompt_ids
        self.want_logprobs = want_logprobs
        self.token_ids: List[int] = []
        self.text_parts: List[str] = []
        self.logprobs: List[Dict[int, Logprob]] = []
        self.deltas: deque = deque()  # text deltas not yet handed to a stream reader
        self.finished = False
        self.finish_reason: Optional[str] = None
        self.error: Optional[str] = None
        self.cached = 0

    def absorb(self, update: tuple) -> None:
        (_, new_ids, new_text, lps, finished, reason, error, _p, _c, cached) = update
        self.token_ids.extend(new_ids)
        if new_text:
            self.text_parts.append(new_text)
            self.deltas.append(new_text)
        for token_id, lp, top in lps:
            entry = {int(tid): Logprob(float(v), rank + 1) for rank, (tid, v) in enumerate(top)}
            if token_id not in entry:
                entry[int(token_id)] = Logprob(float(lp), None)
            self.logprobs.append(entry)
        if finished:
            self.finished = True
            self.finish_reason = reason
            self.error = error or None
            self.cached = cached

    def to_output(self, request_id: int) -> RequestOutput:
        completion = CompletionOutput(
            index=0, text="".join(self.text_parts), token_ids=list(self.token_ids),
            finish_reason=self.finish_reason,
            logprobs=self.logprobs if self.want_logprobs else None,
            cumulative_logprob=None)
        return RequestOutput(request_id=str(request_id), prompt=self.prompt,
                             prompt_token_ids=list(self.prompt_ids), outputs=[completion],
                             finished=self.finished, num_cached_tokens=self.cached, error=self.error)


class LLM:
    """A model plus a DeepInfer engine. `model` is a .gguf file, a Hugging Face model
    directory or a catalogue name; None is the default model (smollm2-135m-instruct)."""

    def __init__(self, model: Optional[str] = None, threads: int = 0, max_num_seqs: int = 64,
                 batch_invariant: bool = False, enable_prefix_caching: bool = True,
                 kv_cache_dtype: str = "auto", **kwargs) -> None:
        unknown = set(kwargs) - {"tokenizer", "dtype", "seed", "trust_remote_code"}
        if unknown:
            raise ValueError(f"LLM(): unknown arguments {sorted(unknown)}")
        self._engine = _C.Engine(model or "", int(threads), int(max_num_seqs),
                                 bool(batch_invariant), bool(enable_prefix_caching),
                                 str(kv_cache_dtype))
        self._tokenizer = Tokenizer(self._engine)
        self._pending: Dict[int, _Pending] = {}
        self._lock = threading.RLock()

    @property
    def model_name(self) -> str:
        return self._engine.name

    def get_tokenizer(self) -> Tokenizer:
        return self._tokenizer

    # ---- generation -------------------------------------------------------------------------

    def generate(self, prompts: Union[PromptType, Sequence[PromptType]],
                 sampling_params: Union[None, SamplingParams, Sequence[SamplingParams]] = None,
                 use_tqdm: bool = False) -> List[RequestOutput]:
        """Runs all prompts together; one RequestOutput per prompt, in input order."""
        items = self._normalize_prompts(prompts)
        return self._run(items, self._params_list(sampling_params, len(items)))

    def chat(self, messages, sampling_params: Union[None, SamplingParams, Sequence[SamplingParams]] = None,
             use_tqdm: bool = False, add_generation_prompt: bool = True,
             chat_template_kwargs: Optional[Dict] = None) -> List[RequestOutput]:
        """One conversation (a list of message dicts) or a list of them, through the model's chat
        encoding (DeepSeek-V4: its own format; chat_template_kwargs={"thinking": True} for
        thinking mode). A message's content may be a list of parts, as in the OpenAI API:
        {"type": "text", "text": ...}, {"type": "image_url", "image_url": {"url": "data:..."}}
        and, for local images, {"type": "image", "image": bytes or a file path} (multimodal
        models only; docs/vision.md)."""
        if isinstance(messages, (list, tuple)) and messages and isinstance(messages[0], (list, tuple)):
            conversations = list(messages)
        else:
            conversations = [messages]
        thinking = _thinking(chat_template_kwargs)
        items = []
        for conv in conversations:
            if _has_parts(conv):
                parted = _part_messages(conv)
                if any(kind != "text" for _, parts in parted for kind, _ in parts):
                    if thinking:
                        raise ValueError("chat_template_kwargs: thinking is not available with images")
                    prepared = self._engine.prepare_chat(parted, add_generation_prompt)
                    items.append((prepared.text or None, list(prepared.prompt_ids), prepared))
                    continue
                # Text parts only: their concatenation, as the server reads them.
                conv = [{"role": role, "content": "".join(text for _, text in parts)} for role, parts in parted]
            pairs = _message_pairs(conv)
            ids = self._engine.encode_chat(pairs, add_generation_prompt, thinking)
            items.append((self._engine.render_chat(pairs, add_generation_prompt, thinking), ids))
        return self._run(items, self._params_list(sampling_params, len(items)))

    def generate_stream(self, prompt: PromptType,
                        sampling_params: Optional[SamplingParams] = None) -> Iterator[str]:
        """Yields text deltas as they are produced; they concatenate to the full completion.
        Closing the iterator early aborts the request."""
        (item,) = self._normalize_prompts([prompt])
        params = sampling_params or SamplingParams()
        with self._lock:
            rid = self._add(0, item, params)
        try:
            while True:
                with self._lock:
                    p = self._pending[rid]
                    while not p.deltas and not p.finished:
                        self._step()
                    deltas = list(p.deltas)
                    p.deltas.clear()
                    done = p.finished
                yield from deltas
                if done:
                    if p.error:
                        raise RuntimeError(p.error)
                    return
        finally:
            with self._lock:
                p = self._pending.pop(rid, None)
                if p is not None and not p.finished:
                    self._engine.abort(rid)

    # ---- internals --------------------------------------------------------------------------

    def _normalize_prompts(self, prompts) -> List[tuple]:
        if isinstance(prompts, (str, dict)):
            prompts = [prompts]
        elif isinstance(prompts, (list, tuple)) and prompts and all(isinstance(t, int) for t in prompts):
            prompts = [{"prompt_token_ids": list(prompts)}]
        if not isinstance(prompts, (list, tuple)):
            raise ValueError("prompts must be a string, a dict or a list of them")
        items = []
        for i, p in enumerate(prompts):
            if isinstance(p, str):
                items.append((p, self._engine.encode(p, True)))
            elif isinstance(p, dict) and "prompt_token_ids" in p:
                ids = p["prompt_token_ids"]
                if not isinstance(ids, (list, tuple)) or not all(
                        isinstance(t, int) and 0 <= t < 2**31 for t in ids):
                    raise ValueError(f"prompts[{i}]: prompt_token_ids must be a list of "
                                     f"non-negative 32-bit ints")
                items.append((p.get("prompt"), list(ids)))
            elif isinstance(p, dict) and isinstance(p.get("prompt"), str):
                items.append((p["prompt"], self._engine.encode(p["prompt"], True)))
            else:
                raise ValueError(f"prompts[{i}]: expected a string or a dict with 'prompt' or "
                                 f"'prompt_token_ids', got {type(p).__name__}")
        return items

    @staticmethod
    def _params_list(sampling_params, n: int) -> List[SamplingParams]:
        if sampling_params is None:
            return [SamplingParams()] * n
        if isinstance(sampling_params, SamplingParams):
            return [sampling_params] * n
        params = list(sampling_params)
        if len(params) != n:
            raise ValueError(f"got {len(params)} sampling_params for {n} prompts")
        if not all(isinstance(p, SamplingParams) for p in params):
            raise ValueError("sampling_params must be SamplingParams objects")
        return params

    def _add(self, index: int, item: tuple, params: SamplingParams) -> int:
        prompt, ids = item[0], item[1]
        images = item[2] if len(item) > 2 else None
        rid = self._engine.add_request(ids, params._to_engine(_UNLIMITED_MAX_TOKENS), images)
        self._pending[rid] = _Pending(index, prompt, ids, params.logprobs is not None)
        return rid

    def _step(self) -> None:
        for update in self._engine.step():
            p = self._pending.get(update[0])
            if p is not None:
                p.absorb(update)

    def _run(self, items: List[tuple], params: List[SamplingParams]) -> List[RequestOutput]:
        with self._lock:
            ids: List[int] = []
            try:
                for i, (item, sp) in enumerate(zip(items, params)):
                    ids.append(self._add(i, item, sp))
            except Exception:
                for rid in ids:
                    self._engine.abort(rid)
                    self._pending.pop(rid, None)
                raise
            try:
                while not all(self._pending[rid].finished for rid in ids):
                    self._step()
                return [self._pending[rid].to_output(rid) for rid in ids]
            finally:
                for rid in ids:
                    p = self._pending.pop(rid, None)
                    if p is not None and not p.finished:
                        self._engine.abort(rid)
