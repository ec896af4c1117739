// The reference for ymlopt's tokenizer.json implementation: transformers.js
// (the @lenml/tokenizers build, fetched by scripts/fetch_tokenizers.sh) on the
// same files and texts.
//
//   NODE_PATH=third_party_cache/tokenizers/node_modules \
//     node tests/reference/hf_tokenizer_ref.js tokenizer.json TEXTS.json OUT.json
//
// TEXTS.json is a list of strings; OUT.json gets, per text, the ids without and
// with the special tokens and the decoded ids: [{plain, special, decoded}].
// tokenizer_config.json is read from beside tokenizer.json when it is there.
const fs = require('fs');
const path = require('path');
const {TokenizerLoader} = require('@lenml/tokenizers');

const [tokFile, textsFile, outFile] = process.argv.slice(2);
const cfgFile = path.join(path.dirname(tokFile), 'tokenizer_config.json');
const tokenizerJSON = JSON.parse(fs.readFileSync(tokFile, 'utf8'));
const tokenizerConfig = fs.existsSync(cfgFile) ? JSON.parse(fs.readFileSync(cfgFile, 'utf8')) : {};
const t = TokenizerLoader.fromPreTrained({tokenizerJSON, tokenizerConfig});
const texts = JSON.parse(fs.readFileSync(textsFile, 'utf8'));
const out = texts.map(s => {
  const plain = Array.from(t.encode(s, {add_special_tokens: false}));
  return {
    plain,
    special: Array.from(t.encode(s, {add_special_tokens: true})),
    decoded: plain.length ? t.decode(plain, {skip_special_tokens: false}) : '',
  };
});
fs.writeFileSync(outFile, JSON.stringify(out));
