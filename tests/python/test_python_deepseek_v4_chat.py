"""The Python package's chat encoding on a DeepSeek-V4 checkpoint (deepseek_v4_dir.py): the
tokenizer's apply_chat_template and LLM.chat use V4's own encoding (recipe/deepseek_v4_chat),
not a chat template: token ids equal DeepSeek's reference encoding
(tests/reference/fixtures/deepseek_v4_chat.jsonl) in chat and thinking mode, and the prompt
lengths that `deepinfer generate` and `deepinfer serve` count for the same messages.
Needs `pip install .` first; skips without it, except under CI=true where it must be there."""
import json

import pytest

from conftest import IN_CI, ROOT, run
from deepseek_v4_dir import make_v4_chat_dir
from server_util import Server

try:
    from deepinfer import LLM, SamplingParams
except ImportError as e:  # not installed
    if IN_CI:
        raise
    pytest.skip(f"deepinfer is not installed ({e}): run `python3 -m pip install .`",
                allow_module_level=True)

CHAT_FIXTURE = ROOT / "tests/reference/fixtures/deepseek_v4_chat.jsonl"


def plain_conversations():
    """The reference conversations the package's (role, content) messages can express: no tools,
    no tool calls, no reasoning effort; earlier turns' reasoning is dropped anyway."""
    out = []
    for line in CHAT_FIXTURE.read_text().splitlines():
        d = json.loads(line)
        ms = d["messages"]
        last_user = max(i for i, m in enumerate(ms) if m["role"] in ("user", "developer"))
        if d["tools"] or d["effort"] or not d["drop_thinking"]:
            continue
        if all(set(m) <= {"role", "content"} or (set(m) <= {"role", "content", "reasoning_content"} and i < last_user)
               for i, m in enumerate(ms)):
            d["messages"] = [{"role": m["role"], "content": m["content"]} for m in ms]
            out.append(d)
    return out


@pytest.fixture(scope="module")
def v4_dir(tmp_path_factory, binary):
    return make_v4_chat_dir(tmp_path_factory.mktemp("deepseek_v4_python"))


@pytest.fixture(scope="module")
def llm(v4_dir):
    return LLM(model=str(v4_dir), threads=1, max_num_seqs=4)


def test_encoding_equals_deepseek_reference(llm):
    tok = llm.get_tokenizer()
    lines = plain_conversations()
    assert len(lines) >= 12
    for d in lines:
        what = f"{d['name']} thinking={d['thinking']}"
        assert tok.apply_chat_template(d["messages"], tokenize=True, thinking=d["thinking"]) == d["ids"], what
        assert tok.apply_chat_template(d["messages"], thinking=d["thinking"]) == d["text"], what


def test_without_generation_prompt_drops_the_assistant_opening(llm):
    tok = llm.get_tokenizer()
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <｜Assistant｜>"}]
    for thinking in (False, True):
        full = tok.apply_chat_template(msgs, tokenize=True, thinking=thinking)
        bare = tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=False, thinking=thinking)
        assert bare == full[:-2]
        assert tok.decode(full[-2:]) == "<｜Assistant｜>" + ("<think>" if thinking else "</think>")
        text = tok.apply_chat_template(msgs, add_generation_prompt=False, thinking=thinking)
        assert text.endswith("Hi <｜Assistant｜>")  # the user's text, not a marker
    done = msgs + [{"role": "assistant", "content": "Hello."}]
    assert tok.apply_chat_template(done, tokenize=True, add_generation_prompt=False) == \
        tok.apply_chat_template(done, tokenize=True)


def test_chat_prompt_ids_match_generate_and_serve(llm, v4_dir, tmp_path):
    lines = [d for d in plain_conversations() if not d["thinking"]]
    params = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
    outs = llm.chat([d["messages"] for d in lines], params)
    assert [o.prompt_token_ids for o in outs] == [d["ids"] for d in lines]
    think = llm.chat(lines[0]["messages"], params, chat_template_kwargs={"thinking": True})[0]
    assert think.prompt_token_ids == llm.get_tokenizer().apply_chat_template(
        lines[0]["messages"], tokenize=True, thinking=True)
    assert think.prompt_token_ids != outs[0].prompt_token_ids
    # `deepinfer generate --input` with the same messages counts the same prompt.
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"messages": d["messages"]}) + "\n" for d in lines))
    r = run("generate", "--model", v4_dir, "--input", tmp_path / "in.jsonl", "--max-tokens", "1", "--json",
            "--threads", "1")
    assert r.returncode == 0, r.stderr
    counted = [json.loads(x)["usage"]["prompt_tokens"] for x in r.stdout.strip().splitlines()]
    assert counted == [len(o.prompt_token_ids) for o in outs]
    # The server too, thinking off and on.
    import openai
    server = Server(v4_dir, "--served-model-name", "tiny-v4", "--threads", "1")
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=300)
        for d, o in zip(lines, outs):
            if any(m["role"] == "developer" for m in d["messages"]):
                continue  # the server reads "developer" as OpenAI's system role (docs/api.md)
            c = client.chat.completions.create(model="tiny-v4", messages=d["messages"], max_tokens=1)
            assert c.usage.prompt_tokens == len(o.prompt_token_ids), d["name"]
        c = client.chat.completions.create(model="tiny-v4", messages=lines[0]["messages"], max_tokens=1,
                                           extra_body={"chat_template_kwargs": {"thinking": True}})
        assert c.usage.prompt_tokens == len(think.prompt_token_ids)
    finally:
        server.stop()


def test_thinking_is_refused_for_models_without_it(binary):
    from conftest import MODEL
    if not MODEL.exists():
        pytest.skip(f"{MODEL} is missing")
    with pytest.raises(ValueError, match="thinking"):
        LLM(model=str(MODEL), max_num_seqs=1).get_tokenizer().apply_chat_template(
            [{"role": "user", "content": "hi"}], thinking=True)
    with pytest.raises(ValueError, match="chat_template_kwargs"):
        LLM(model=str(MODEL), max_num_seqs=1).chat([{"role": "user", "content": "hi"}],
                                                  chat_template_kwargs={"enable_thinking": True})
