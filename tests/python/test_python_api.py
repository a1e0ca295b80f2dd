"""The `deepinfer` Python package (vLLM-style offline API) against the default model.
Needs `pip install .` first; skips without it, except under CI=true where it must be there."""
import json

import pytest

from conftest import BINARY, IN_CI, MODEL, run

try:
    import deepinfer
    from deepinfer import LLM, SamplingParams
except ImportError as e:  # not installed
    if IN_CI:
        raise
    pytest.skip(f"deepinfer is not installed ({e}): run `python3 -m pip install .`",
                allow_module_level=True)

GREEDY = dict(temperature=0.0)


@pytest.fixture(scope="module")
def llm():
    if not MODEL.exists():
        if IN_CI:
            pytest.fail(f"{MODEL} is missing (make test pulls it)")
        pytest.skip(f"{MODEL} is missing: run `deepinfer pull smollm2-135m-instruct`")
    return LLM(model=str(MODEL), max_num_seqs=8)


def test_greedy_matches_cli(llm):
    prompt = "The three primary colors are"
    out = llm.generate(prompt, SamplingParams(max_tokens=20, **GREEDY))
    assert len(out) == 1
    c = out[0].outputs[0]
    assert out[0].prompt == prompt
    assert out[0].prompt_token_ids == llm.get_tokenizer().encode(prompt)
    assert c.finish_reason in ("stop", "length") and c.token_ids
    assert llm.get_tokenizer().decode(c.token_ids) == c.text
    if not BINARY.exists():
        if IN_CI:
            pytest.fail(f"{BINARY} is missing")
        pytest.skip(f"{BINARY} is missing: run `make` to compare with the CLI")
    r = run("generate", "--model", MODEL, "--no-chat", "--json", "--prompt", prompt,
            "--max-tokens", "20", "--temperature", "0")
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout.strip().splitlines()[0])
    assert rec["token_ids"] == c.token_ids
    assert rec["text"] == c.text
    assert rec["finish_reason"] == c.finish_reason


def test_seed_reproducibility(llm):
    prompt = "Once upon a time"
    p7 = SamplingParams(temperature=1.0, max_tokens=8, seed=7, ignore_eos=True)
    a = llm.generate(prompt, p7)[0].outputs[0].token_ids
    b = llm.generate(prompt, p7)[0].outputs[0].token_ids
    assert a == b and len(a) == 8
    # Other seeds, run together in one batch.
    others = [o.outputs[0].token_ids for o in llm.generate(
        [prompt] * 3, [SamplingParams(temperature=1.0, max_tokens=8, seed=s, ignore_eos=True)
                       for s in (1, 2, 3)])]
    assert any(o != a for o in others)  # the seed matters


def test_default_temperature_is_one_as_in_vllm(llm):
    """docs/sampling.md: SamplingParams defaults to temperature 1.0 (vLLM's), from the table."""
    assert SamplingParams().temperature == 1.0 and SamplingParams().max_tokens == 16
    table = {f["name"]: f["default"] for f in deepinfer._C.sampling_fields()}
    assert {k: getattr(SamplingParams(), k) for k in table} == table
    prompt = "Once upon a time"
    outs = {}
    for seed in (7, 8, 9):
        default = llm.generate(prompt, SamplingParams(max_tokens=8, seed=seed, ignore_eos=True))
        explicit = llm.generate(prompt, SamplingParams(temperature=1.0, max_tokens=8, seed=seed, ignore_eos=True))
        assert default[0].outputs[0].token_ids == explicit[0].outputs[0].token_ids
        outs[seed] = default[0].outputs[0].token_ids
    greedy = llm.generate(prompt, SamplingParams(max_tokens=8, ignore_eos=True, **GREEDY))[0].outputs[0].token_ids
    assert any(o != greedy for o in outs.values())  # the default samples


def test_batch_runs_in_input_order(llm):
    prompts = ["1, 2, 3, 4, 5,", "The capital of France is", "Hello", {"prompt_token_ids": [1, 2, 3]}]
    lengths = [3, 7, 5, 4]
    params = [SamplingParams(max_tokens=n, ignore_eos=True, **GREEDY) for n in lengths]
    outs = llm.generate(prompts, params)
    assert [len(o.outputs[0].token_ids) for o in outs] == lengths
    assert [o.prompt for o in outs] == prompts[:3] + [None]
    assert outs[3].prompt_token_ids == [1, 2, 3]
    assert all(o.outputs[0].finish_reason == "length" and o.finished for o in outs)
    assert len({o.request_id for o in outs}) == 4
    # Each answer is the same as when its prompt runs alone (greedy, short).
    alone = llm.generate(prompts[0], params[0])[0]
    assert alone.outputs[0].text == outs[0].outputs[0].text
    assert "6" in outs[0].outputs[0].text


def test_chat_answers(llm):
    conv = [{"role": "user", "content": "What is the capital of France?"}]
    outs = llm.chat(conv, SamplingParams(max_tokens=32, **GREEDY))
    assert len(outs) == 1 and "Paris" in outs[0].outputs[0].text
    assert "<|im_start|>" in outs[0].prompt  # the rendered template
    two = llm.chat([conv, [{"role": "user", "content": "Say hi."}]], SamplingParams(max_tokens=4, **GREEDY))
    assert len(two) == 2 and two[0].outputs[0].token_ids == outs[0].outputs[0].token_ids[:len(two[0].outputs[0].token_ids)]
    tok = llm.get_tokenizer()
    assert tok.apply_chat_template(conv, tokenize=True) == outs[0].prompt_token_ids


def test_stream_deltas_concatenate_to_full_text(llm):
    prompt = "Write a sentence about the sea:"
    params = SamplingParams(max_tokens=16, **GREEDY)
    full = llm.generate(prompt, params)[0].outputs[0].text
    deltas = list(llm.generate_stream(prompt, params))
    assert len(deltas) > 1
    assert "".join(deltas) == full
    # Leaving a stream early aborts it; the engine keeps working.
    it = llm.generate_stream(prompt, SamplingParams(max_tokens=200, ignore_eos=True, **GREEDY))
    next(it)
    it.close()
    assert llm.generate(prompt, params)[0].outputs[0].text == full


def test_stop_strings_and_logprobs(llm):
    out = llm.generate("1, 2, 3, 4, 5,", SamplingParams(max_tokens=40, stop="9", logprobs=2, **GREEDY))[0]
    c = out.outputs[0]
    assert c.finish_reason == "stop" and "9" not in c.text and "8" in c.text
    assert len(c.logprobs) == len(c.token_ids)
    for tid, entry in zip(c.token_ids, c.logprobs):
        assert tid in entry and entry[tid].logprob <= 0 and len(entry) >= 2


def test_tokenizer_round_trip(llm):
    tok = llm.get_tokenizer()
    text = "DeepInfer runs models, héllo 👋"
    ids = tok.encode(text, add_special_tokens=False)
    assert ids and tok.decode(ids) == text
    assert tok.vocab_size > 1000 and tok.eos_token_id >= 0


@pytest.mark.parametrize("kwargs", [dict(temperature=-1.0), dict(top_p=0.0), dict(top_p=1.5),
                                    dict(min_p=2.0), dict(repetition_penalty=0.0)])
def test_bad_sampling_params_raise_value_error(llm, kwargs):
    with pytest.raises(ValueError):
        llm.generate("Hello", SamplingParams(max_tokens=2, **kwargs))
    assert llm.generate("Hello", SamplingParams(max_tokens=2, **GREEDY))[0].outputs[0].token_ids


def test_bad_inputs_raise_value_error(llm):
    with pytest.raises(ValueError):
        SamplingParams(max_tokens=-1)
    with pytest.raises(ValueError):
        SamplingParams(stop=[""])
    with pytest.raises(ValueError):
        llm.generate(42)
    with pytest.raises(ValueError):
        llm.generate(["a", "b"], [SamplingParams()])
    with pytest.raises(ValueError):
        llm.generate({"prompt_token_ids": [10 ** 6]}, SamplingParams(max_tokens=2))  # > vocab
    with pytest.raises(ValueError):
        llm.generate({"prompt_token_ids": [-1]}, SamplingParams(max_tokens=2))
    with pytest.raises(ValueError):
        llm.chat([{"role": "user"}])


def test_missing_model_raises():
    with pytest.raises((FileNotFoundError, ValueError, RuntimeError)) as e:
        LLM(model="/nonexistent/model.gguf")
    assert "nonexistent" in str(e.value)
