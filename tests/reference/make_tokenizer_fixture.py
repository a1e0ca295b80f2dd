#!/usr/bin/env python3
"""Builds the tokenizer and chat-template parity fixtures for SmolLM2-135M-Instruct.

Writes tests/reference/fixtures/tokenizer_smollm2.jsonl ({"text", "ids", "ids_special"} per
line) and chat_smollm2.jsonl ({"messages", "add_generation_prompt", "text", "ids"}).

Reference: the Hugging Face `tokenizers` library with the model's own pre-tokenizer
(Digits(individual_digits) + ByteLevel, as in SmolLM2's tokenizer.json and llama.cpp's
"smollm" pre type). transformers' GGUF loader (AutoTokenizer(..., gguf_file=...)) drops the
Digits step; the script cross-checks it and reports where it differs (only strings with
non-ASCII numerics such as '²' or '١'); every other line must agree or the script fails.

"ids" is the encoding with control tokens treated as plain text (transformers
split_special_tokens=True; our allow_special=false). "ids_special" is the default HF encoding
where "<|im_start|>" etc. become control tokens (our allow_special=true); it is present only
when it differs.

It also trains two tiny byte-level BPE tokenizers with the `tokenizers` library (different
pre-tokenizer pipelines: a Llama 3 Split regex + ignore_merges; Split/Digits/ByteLevel with
add_prefix_space), saves each as tokenizer_tiny_<name>/{tokenizer.json,tokenizer_config.json}
and their encodings of the same strings as tokenizer_tiny_<name>.jsonl, to test the
tokenizer.json loader without any model download.

Usage: python3 tests/reference/make_tokenizer_fixture.py [--gguf PATH]
"""
import argparse
import json
import os
import random
import unicodedata

from tokenizers import pre_tokenizers
from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")


def base_strings():
    s = [
        "Hello world", "Hello, world!", "hello   world", " leading space", "trailing space ",
        "It's a dog's life, isn't it? We're here, they've gone, I'm fine, you'll see, he'd go.",
        "IT'S LOUD. DON'T SHOUT. WE'RE DONE. THEY'VE GONE. I'M OUT. YOU'LL SEE. HE'D GO.",
        "MiXeD CaSe TeXt WiTh CamelCase and snake_case and SCREAMING_CASE",
        "Le café est très bon. Ça va? Où est la bibliothèque? Naïve façade.",
        "Der Größenwahn überfällt Bären im Frühling. Straße, Äpfel, Öl.",
        "¿Dónde está el baño? ¡Qué día más bonito! Mañana será otro día.",
        "Привет, мир! Как дела? Съешь же ещё этих мягких французских булок.",
        "Γειά σου Κόσμε! Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
        "你好，世界！今天天气很好。我们去公园散步吧。",
        "日本語のテキスト：こんにちは、世界。カタカナとひらがなと漢字。",
        "한국어 텍스트입니다. 안녕하세요, 세계!",
        "مرحبا بالعالم! كيف حالك اليوم؟ اللغة العربية جميلة.",
        "नमस्ते दुनिया! आप कैसे हैं? हिंदी भाषा बहुत सुंदर है।",
        "שלום עולם! מה שלומך?", "สวัสดีชาวโลก ภาษาไทย", "Xin chào thế giới! Tiếng Việt có dấu.",
        "Merhaba dünya! Türkçe karakterler: ğüşöçı İ", "Witaj świecie! Zażółć gęślą jaźń.",
        "emoji: 😀😃😄😁 👍🏽 ❤️ 🇫🇷 🇯🇵 👨‍👩‍👧‍👦 👩🏽‍💻 🏳️‍🌈 🧑‍🤝‍🧑",
        "👨‍👩‍👧‍👦👨‍👩‍👧‍👦👨‍👩‍👧‍👦", "🤖🤖🤖 robots!!! 🚀🚀", "a😀b😀c", "✓ ✗ → ← ↑ ↓ ∑ ∫ √ ∞ ≠ ≤ ≥",
        "\t\ttabs\tand\ttabs", "\n\n\nnewlines\n\n", "\r\nwindows\r\nline\r\nendings\r\n",
        " " * 20 + "twenty spaces", "x" + " " * 100 + "y", "\n" * 50, " \n \n \n ", "\t \t \t",
        "0", "7", "42", "123", "1234", "12345678901234567890", "3.14159265358979", "-273.15",
        "1,000,000", "1e-10", "0x1F2E3D", "2024-01-31T12:34:56Z", "+1 (555) 123-4567",
        "version 1.2.3-rc.4+build.5", "IPv4 192.168.0.1 and IPv6 2001:db8::1",
        "x² + y³ = z⁴", "½ ¼ ¾ ⅓", "Ⅻ Ⅳ Ⅸ", "①②③", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "１２３４５",
        "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>user\nHi<|im_end|>",
        "<|im_start|>system\nEvil<|im_end|>", "text<|im_end|>more", "<|im_start|><|im_start|>",
        "< |im_start| >", "<|im_start", "im_start|>", "<repo_name>my/repo<file_sep>a.py",
        "<jupyter_code>print(1)<jupyter_output>1", "<s></s><unk>[INST][/INST]", "<think>hmm</think>",
        "<|eot_id|><|begin_of_text|><|start_header_id|>user<|end_header_id|>",
        "", " ", "  ", "a", "'", "''", "'s", " 's", "'S", "''s", "a's'b't'c're", "don''t",
        "~!@#$%^&*()_+`-={}|[]\\:\";'<>?,./", "....", "!!!???", "---===+++", "```", "***bold***",
        "www.example.com/path?query=1&x=2#frag", "user@example.com", "C:\\Users\\name\\file.txt",
        "\u00a0non-breaking\u00a0space", "zero\u200bwidth\u200bspace", "\u3000ideographic space",
        "line\u2028separator", "next\u0085line", "bom\ufeffhere", "soft\u00adhyphen",
        "combining: e\u0301 a\u0308 n\u0303", "ﬁ ligature ﬀ", "Ｆｕｌｌｗｉｄｔｈ", "ｶﾀｶﾅ",
    ]
    return s


CODE = [
    'def fib(n):\n    """Return n-th Fibonacci."""\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
    '#include <stdio.h>\nint main(void) {\n\tprintf("hello %d\\n", 42);\n\treturn 0;\n}\n',
    'fn main() {\n    let v: Vec<i32> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n}\n',
    'const f = async (x) => {\n  await fetch(`/api/${x}`);\n  return x ?? null;\n};\n',
    'SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;',
    '<html>\n  <body class="main">\n    <p>Hello &amp; welcome</p>\n  </body>\n</html>\n',
    '{"key": "value", "list": [1, 2, 3], "nested": {"a": null, "b": true}}',
    'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hi")\n}\n',
    'public class Main {\n    public static void main(String[] args) {\n        System.out.println("x");\n    }\n}\n',
    '#!/bin/bash\nfor f in *.txt; do\n  echo "$f" | sed -e \'s/a/b/g\' >> out.log\ndone\n',
    '\\begin{equation}\n  E = mc^2 \\quad \\int_0^\\infty e^{-x} dx = 1\n\\end{equation}',
    'template <typename T>\nstd::vector<T> f(const std::vector<T>& v) { return {v.rbegin(), v.rend()}; }\n',
    '    indented four\n        indented eight\n\t\ttabbed\n',
    'x = [i**2 for i in range(100) if i % 3 == 0]  # list comprehension',
]

WORDS = ("the of and to in is you that it he was for on are as with his they I at be this have "
         "from or one had by word but not what all were we when your can said there use an each "
         "which she do how their if will up other about out many then them these so some her "
         "would make like him into time has look two more write go see number no way could people "
         "my than first water been call who oil its now find long down day did get come made may "
         "part Über naïve café résumé Москва 北京 東京 서울 القاهرة दिल्ली").split()


def random_strings(rng, n):
    out = []
    assigned = [cp for cp in range(0x20, 0x30000)
                if unicodedata.category(chr(cp)) not in ("Cn", "Cs", "Co")]
    for i in range(n):
        kind = i % 8
        if kind == 0:  # random words with random punctuation and spacing
            parts = []
            for _ in range(rng.randint(1, 25)):
                w = rng.choice(WORDS)
                if rng.random() < 0.2: w = w.upper()
                if rng.random() < 0.1: w = w.capitalize()
                if rng.random() < 0.15: w += rng.choice([",", ".", "!", "?", "'s", "'t", "'re", ":", ";", "...", "—"])
                if rng.random() < 0.1: w = str(rng.randint(0, 10**rng.randint(1, 12)))
                parts.append(w)
                parts.append(rng.choice([" ", " ", " ", "  ", "\n", "\t", " \n", "\n\n", "   "]))
            out.append("".join(parts))
        elif kind == 1:  # random assigned unicode characters
            out.append("".join(chr(rng.choice(assigned)) for _ in range(rng.randint(1, 30))))
        elif kind == 2:  # byte-ish: latin-1 range incl. controls
            out.append("".join(chr(rng.randint(0, 255)) for _ in range(rng.randint(1, 40))))
        elif kind == 3:  # random bytes decoded leniently (U+FFFD where invalid)
            b = bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 60)))
            out.append(b.decode("utf-8", errors="replace"))
        elif kind == 4:  # whitespace soup
            out.append("".join(rng.choice([" ", "\t", "\n", "\r", "\r\n", "a", "1", ".", "\u00a0", "\u3000"])
                               for _ in range(rng.randint(1, 60))))
        elif kind == 5:  # numbers
            out.append(" ".join(str(rng.randint(0, 10**rng.randint(1, 30))) + rng.choice(["", ".5", "%", "km", ",000"])
                                for _ in range(rng.randint(1, 8))))
        elif kind == 6:  # code snippet with a random slice and indentation change
            c = rng.choice(CODE)
            a = rng.randint(0, len(c) - 1)
            out.append(c[a:a + rng.randint(1, len(c))].replace("    ", rng.choice(["    ", "  ", "\t"])))
        else:  # mixed scripts, emoji and special-looking text
            pieces = [rng.choice(WORDS), rng.choice(["😀", "👨‍👩‍👧", "🇩🇪", "✨", "🏳️‍⚧️"]),
                      rng.choice(["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<file_sep>", "<|", "|>"]),
                      rng.choice(["你好", "مرحبا", "नमस्ते", "Привет", "こんにちは"]), str(rng.randint(0, 99999))]
            rng.shuffle(pieces)
            out.append(rng.choice(["", " ", "\n"]).join(pieces))
    return out


CONVERSATIONS = [
    ([{"role": "user", "content": "Hello!"}], True),
    ([{"role": "user", "content": "Hello!"}], False),
    ([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}], True),
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
      {"role": "user", "content": "Tell me a joke about cats.\n\nMake it short."}], True),
    ([{"role": "system", "content": "Réponds en français."}, {"role": "user", "content": "Quelle est la capitale du Japon ? 東京?"},
      {"role": "assistant", "content": "Tokyo (東京)."}], False),
    ([{"role": "user", "content": "  leading and trailing spaces  "}], True),
    ([{"role": "user", "content": "\n\nnewlines first"}, {"role": "assistant", "content": "ok\n"}], True),
    ([{"role": "user", "content": "code:\n```python\nprint('hi')\n```"}], True),
    ([{"role": "user", "content": "emoji 👨‍👩‍👧‍👦 and numbers 12345"}], True),
    ([{"role": "tool", "content": "{\"temp\": 21}"}, {"role": "user", "content": "and?"}], True),
]


LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def make_tiny_hf(name, strings):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, trainers
    tok = Tokenizer(models.BPE(ignore_merges=(name == "llama3")))
    if name == "llama3":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        specials = ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"]
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split("::", behavior="merged_with_previous"),
            pre_tokenizers.Digits(individual_digits=False),
            pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
        specials = ["<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(strings[:1500], trainer)
    tok.add_tokens([AddedToken("<think>", special=False, normalized=False)])
    d = os.path.join(OUT, f"tokenizer_tiny_{name}")
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    cfg = {"bos_token": specials[0], "eos_token": specials[1], "add_bos_token": name == "llama3",
           "chat_template": "{{ bos_token }}{% for m in messages %}{{ m['role'] + ': ' + m['content'] }}{{ eos_token }}{% endfor %}"}
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    lines = []
    for text in strings[::4]:
        tok.encode_special_tokens = True
        ids = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        ids_special = tok.encode(text, add_special_tokens=False).ids
        rec = {"text": text, "ids": ids}
        if ids_special != ids:
            rec["ids_special"] = ids_special
        lines.append(json.dumps(rec, ensure_ascii=False))
    path = os.path.join(OUT, f"tokenizer_tiny_{name}.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{path}: {len(lines)} strings")


def main():
    ap = argparse.ArgumentParser()
    home = os.environ.get("DEEPINFER_HOME", os.path.expanduser("~/.cache/deepinfer"))
    ap.add_argument("--gguf", default=os.path.join(home, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    args = ap.parse_args()

    hf = AutoTokenizer.from_pretrained(os.path.dirname(args.gguf), gguf_file=os.path.basename(args.gguf))
    ref = hf.backend_tokenizer  # a tokenizers.Tokenizer; add the model's Digits step back
    ref.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])

    rng = random.Random(1234)
    strings = base_strings() + CODE + random_strings(rng, 2200)
    lines, gguf_loader_diffs = [], 0
    for text in strings:
        ref.encode_special_tokens = True
        ids = ref.encode(text, add_special_tokens=False).ids
        ref.encode_special_tokens = False
        ids_special = ref.encode(text, add_special_tokens=False).ids
        hf_ids = hf.encode(text, add_special_tokens=False, split_special_tokens=True)
        if hf_ids != ids:
            if not any(unicodedata.category(c)[0] == "N" and not c.isascii() for c in text):
                raise SystemExit(f"transformers and tokenizers disagree on {text!r}: {hf_ids} vs {ids}")
            gguf_loader_diffs += 1
        rec = {"text": text, "ids": ids}
        if ids_special != ids:
            rec["ids_special"] = ids_special
        lines.append(json.dumps(rec, ensure_ascii=False))
    path = os.path.join(OUT, "tokenizer_smollm2.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{path}: {len(lines)} strings; transformers' GGUF loader differs on {gguf_loader_diffs} "
          f"(non-ASCII numerics: it drops the Digits pre-tokenizer)")

    chat = []
    for messages, gen in CONVERSATIONS:
        text = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
        ref.encode_special_tokens = False
        ids = ref.encode(text, add_special_tokens=False).ids
        hf_ids = hf.apply_chat_template(messages, tokenize=True, add_generation_prompt=gen)
        if hasattr(hf_ids, "keys"):
            hf_ids = hf_ids["input_ids"]
        if list(hf_ids) != ids:
            raise SystemExit(f"apply_chat_template ids differ from encoding its text: {messages}")
        chat.append(json.dumps({"messages": messages, "add_generation_prompt": gen, "text": text,
                                "ids": ids}, ensure_ascii=False))
    path = os.path.join(OUT, "chat_smollm2.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(chat) + "\n")
    print(f"{path}: {len(chat)} conversations")

    extra = ["a <think> b", "<think><think>", "x::y::z", "::", "12345 678", "<s>hi</s>", "<|im_start|>"]
    for name in ("llama3", "prefix"):
        make_tiny_hf(name, strings + extra * 4)


if __name__ == "__main__":
    main()
