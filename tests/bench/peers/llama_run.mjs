#!/usr/bin/env node
// Runs a GGUF model on llama.cpp's CPU backend (node-llama-cpp's prebuilt
// binaries) with token ids from a .npy file: N timed prefills of the ids (the
// sequence cleared between rounds), then one untimed pass that writes the
// next-token log-probabilities of every position to OUT.npy [seq, vocab], and
// prints the times as one JSON line:
//
//   node llama_run.mjs MODEL.gguf IDS.npy OUT.npy [--threads T] [--rounds N] [--peers DIR]
//   node llama_run.mjs MODEL.gguf IDS.npy OUT.npy --decode N [--threads T] [--rounds R]
//
// --decode N: instead, R rounds of generation: the prefill of the ids, then
// greedy decode steps until N tokens (llama.cpp's sampler at temperature 0);
// OUT.npy gets the last round's N token ids (i32), and each round's JSON has
// prefill_ms (to the first token) and decode_ms (the N - 1 tokens after it).
//
// Context: F32 KV cache (llama.cpp's default F16 would add its own rounding),
// one batch holding every id. --peers DIR: where scripts/fetch_peers.sh
// installed (default $YMLOPT_PEERS_DIR, else third_party_cache/peers).
// JSON: {llama_cpp, threads, load_ms, rounds: [{run_ms}], shape}.
import fs from 'fs';
import os from 'os';
import path from 'path';
import {fileURLToPath, pathToFileURL} from 'url';

const here = path.dirname(fileURLToPath(import.meta.url));

function parseArgs(argv) {
  const a = {pos: [], threads: os.cpus().length, rounds: 1, decode: 0,
    peers: process.env.YMLOPT_PEERS_DIR || path.join(here, '../../../third_party_cache/peers')};
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i];
    if (!k.startsWith('--')) { a.pos.push(k); continue; }
    const key = k.slice(2);
    if (!(key in a) || key === 'pos' || i + 1 >= argv.length) throw new Error(`unknown option or missing value: ${k}`);
    a[key] = typeof a[key] === 'number' ? Number(argv[++i]) : argv[++i];
  }
  if (a.pos.length !== 3) throw new Error('usage: llama_run.mjs MODEL.gguf IDS.npy OUT.npy [--threads T] [--rounds N]');
  return a;
}

// int32 or int64 ids of a version 1-3 .npy file.
function readIds(file) {
  const b = fs.readFileSync(file);
  if (b.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const v1 = b[6] === 1;
  const start = (v1 ? 10 : 12) + (v1 ? b.readUInt16LE(8) : b.readUInt32LE(8));
  const descr = /'descr':\s*'([^']+)'/.exec(b.toString('latin1', 0, start))[1];
  const size = descr === '<i4' ? 4 : descr === '<i8' ? 8 : 0;
  if (!size) throw new Error(`${file}: ids must be <i4 or <i8, not ${descr}`);
  const ids = [];
  for (let at = start; at < b.length; at += size) ids.push(size === 4 ? b.readInt32LE(at) : Number(b.readBigInt64LE(at)));
  return ids;
}

function writeNpy(file, rows, cols, data, descr = '<f4') {
  let h = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${rows}, ${cols}), }`;
  h += ' '.repeat(63 - ((10 + h.length) % 64)) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY\x01\x00', 0, 'latin1');
  head.writeUInt16LE(h.length, 8);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(h, 'latin1'), Buffer.from(data.buffer)]));
}

const a = parseArgs(process.argv.slice(2));
const [modelPath, idsPath, outPath] = a.pos;
const pkg = path.join(a.peers, 'node_modules/node-llama-cpp');
const {getLlama} = await import(pathToFileURL(path.join(pkg, 'dist/index.js')).href);
const version = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')).version;
const ids = readIds(idsPath);

const t0 = performance.now();
const llama = await getLlama({gpu: false, build: 'never', logLevel: 'error'});
const model = await llama.loadModel({modelPath, useMmap: true});
const context = await model.createContext({contextSize: ids.length + a.decode + 8, batchSize: ids.length, threads: a.threads,
  experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32'});
const seq = context.getSequence();
const load_ms = performance.now() - t0;

if (a.decode > 0) {
  const rounds = [];
  let tokens = [];
  for (let r = 0; r < a.rounds; ++r) {
    await seq.clearHistory();
    tokens = [];
    const t0 = performance.now();
    let first = 0;
    const gen = seq.evaluate(ids, {temperature: 0});
    for await (const tok of gen) {
      if (tokens.length === 0) first = performance.now();
      tokens.push(tok);
      if (tokens.length >= a.decode) break;
    }
    const end = performance.now();
    rounds.push({prefill_ms: first - t0, decode_ms: end - first});
  }
  writeNpy(outPath, 1, tokens.length, Int32Array.from(tokens), '<i4');
  console.log(JSON.stringify({llama_cpp: `node-llama-cpp ${version}`, threads: a.threads, load_ms, rounds,
    tokens: tokens.length}));
  await context.dispose();
  await model.dispose();
  process.exit(0);
}

const rounds = [];
for (let r = 0; r < a.rounds; ++r) {
  await seq.clearHistory();
  const t = performance.now();
  await seq.controlledEvaluate(ids);
  rounds.push({run_ms: performance.now() - t});
}
// every position's next-token distribution, as log-probabilities (untimed)
await seq.clearHistory();
const plain = {temperature: 1, topK: 0, topP: 1, minP: 0};
const out = await seq.controlledEvaluate(ids.map((t) => [t, {generateNext: {probabilities: true, options: plain}}]));
const vocab = out[0].next.probabilities.size;  // every token: no top-k, top-p or min-p cut
const logp = new Float32Array(ids.length * vocab).fill(-Infinity);
out.forEach((o, i) => { for (const [tok, p] of o.next.probabilities) logp[i * vocab + tok] = Math.log(p); });
writeNpy(outPath, ids.length, vocab, logp);
console.log(JSON.stringify({llama_cpp: `node-llama-cpp ${version}`, threads: a.threads, load_ms, rounds,
  shape: [ids.length, vocab]}));
await context.dispose();
await model.dispose();
