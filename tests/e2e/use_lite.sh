#!/usr/bin/env bash
# USE-lite end to end (tokenizer + workflow) against the TF.js reference run
# with Node on the same fetched model: cosine >= 0.9999 for every sentence.
source "$(dirname "$0")/lib.sh"
y=$1
dist=${YMLOPT_USE_LITE_DIR:-}
if [ -z "$dist" ] || [ ! -f "$dist/model.json" ] || ! command -v node >/dev/null; then
  echo "skip: USE-lite not fetched (scripts/fetch_use_lite.sh; scripts/test.sh sets YMLOPT_USE_LITE_DIR) or no node"
  exit 77
fi
long=$(for i in $(seq 1 60); do printf 'Elizabeth walked to Pemberley, thinking of Darcy. '; done)
python3 - "$tmp/sentences.json" "$long" <<'PY'
import json, sys
s = [
    "Hello world.", "hello world", "HELLO WORLD!!!", "It is a truth universally acknowledged, that a single man "
    "in possession of a good fortune, must be in want of a wife.", "Mr. Darcy's pride; Elizabeth's prejudice?",
    "The quick brown fox jumps over the lazy dog.", "Numbers: 3.14159, 2,718 and 42%.", "e-mail: someone@example.com",
    "Größe, café, naïve, façade, Ærøskøbing.", "Москва — столица России.", "東京は日本の首都です。",
    "¿Dónde está la biblioteca?", "emoji 😀👍 and symbols ©®™", "tabs\tand\nnewlines", "   leading and trailing   ",
    "", "a", "!!!", "URL https://example.org/path?x=1&y=2", "Sentence embeddings map text to vectors.",
    "The weather is lovely today.", "It is raining cats and dogs.", sys.argv[2],
]
json.dump(s, open(sys.argv[1], "w"))
print(len(s), "sentences")
PY
node tests/reference/use_lite_ref.mjs "$dist" "$tmp/sentences.json" "$tmp/ref.json" || { echo "FAIL: TF.js reference"; exit 1; }
mapfile -t args < <(python3 -c 'import json,sys; [print(x.replace("\n", "\\n")) for x in json.load(open(sys.argv[1]))]' "$tmp/sentences.json")
# pass the sentences through a file-free argv: newlines were escaped above, restore them
for i in "${!args[@]}"; do args[$i]=$(printf "%b" "${args[$i]}"); done
expect_rc 0 "embed $((${#args[@]})) sentences" -- "$y" embed --json --model "$dist" -- "${args[@]}"
printf '%s\n' "$out" | tail -1 > "$tmp/ours.json"
python3 - "$tmp/sentences.json" "$tmp/ref.json" "$tmp/ours.json" <<'PY' || fails=$((fails + 1))
import json, math, sys
sents = json.load(open(sys.argv[1])); ref = json.load(open(sys.argv[2])); ours = json.load(open(sys.argv[3]))
assert len(ref) == len(ours) == len(sents), (len(ref), len(ours), len(sents))
worst = 1.0
for s, a, b in zip(sents, ref, ours):
    cos = sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    worst = min(worst, cos)
    if cos < 0.9999:
        print(f"FAIL: cosine {cos:.6f} for {s[:60]!r}")
print(f"{len(sents)} sentences, lowest cosine {worst:.7f}")
assert worst >= 0.9999
PY
finish
