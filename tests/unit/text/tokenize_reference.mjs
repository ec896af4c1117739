// Reference USE-lite token ids from the JS tokenizer of @energetic-ai/embeddings.
//
//   node tokenize_reference.mjs DIST SENTENCES.json OUT.txt
//
// DIST is the model's dist folder (scripts/fetch_use_lite.sh prints it; the
// packages are resolved from the node_modules folder that holds it).
// SENTENCES.json is a JSON list of strings; OUT.txt gets one line per
// sentence: its ids separated by spaces (an empty line for no ids).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const [dist, sentencesPath, outPath] = process.argv.slice(2);
if (!dist || !sentencesPath || !outPath) {
  console.error('usage: node tokenize_reference.mjs DIST SENTENCES.json OUT.txt');
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(dist), 'index.js'));
const { EmbeddingsModel } = require('@energetic-ai/embeddings');
const vocabulary = JSON.parse(fs.readFileSync(path.join(dist, 'vocab.json'), 'utf-8'));
// The constructor only builds the tokenizer; no model is needed to encode.
const { tokenizer } = new EmbeddingsModel({ vocabulary, model: null });
const sentences = JSON.parse(fs.readFileSync(sentencesPath, 'utf-8'));
const lines = sentences.map((s) => tokenizer.encode(s).join(' '));
fs.writeFileSync(outPath, lines.join('\n') + '\n');
