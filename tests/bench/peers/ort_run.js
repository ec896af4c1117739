#!/usr/bin/env node
// Runs an ONNX model on ONNX Runtime's CPU backend (onnxruntime-node) with token
// ids from a .npy file, N rounds in one session, writes the output to a .npy
// file and prints the times as one JSON line:
//
//   node ort_run.js MODEL.onnx IDS.npy OUT.npy [--threads T] [--rounds N]
//        [--optimized PATH] [--peers DIR]
//
// Session: intraOpNumThreads T (default: all cores), interOpNumThreads 1,
// sequential execution, every graph optimization. A round is session.run plus
// writing OUT.npy (ymlopt's makespan also ends with the save of its output).
// --optimized PATH also saves the graph ORT optimized (to see its fusions).
// --peers DIR: where scripts/fetch_peers.sh installed (default
// $YMLOPT_PEERS_DIR, else third_party_cache/peers).
// JSON: {ort, threads, load_ms, rounds: [{run_ms, save_ms}], shape}.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

function parseArgs(argv) {
  const a = {pos: [], threads: os.cpus().length, rounds: 1, optimized: '',
    peers: process.env.YMLOPT_PEERS_DIR || path.join(__dirname, '../../../third_party_cache/peers')};
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i];
    if (!k.startsWith('--')) { a.pos.push(k); continue; }
    const key = k.slice(2);
    if (!(key in a) || i + 1 >= argv.length) throw new Error(`unknown option or missing value: ${k}`);
    a[key] = typeof a[key] === 'number' ? Number(argv[++i]) : argv[++i];
  }
  if (a.pos.length !== 3) throw new Error('usage: ort_run.js MODEL.onnx IDS.npy OUT.npy [--threads T] [--rounds N]');
  return a;
}

// .npy (version 1-3) of int32 or int64 values: a BigInt64Array.
function readIds(file) {
  const b = fs.readFileSync(file);
  if (b.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const v1 = b[6] === 1;
  const hlen = v1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = (v1 ? 10 : 12) + hlen;
  const descr = /'descr':\s*'([^']+)'/.exec(b.toString('latin1', 0, start))[1];
  const n = (b.length - start) / (descr === '<i4' ? 4 : 8);
  const out = new BigInt64Array(n);
  for (let i = 0; i < n; ++i) {
    if (descr === '<i4') out[i] = BigInt(b.readInt32LE(start + 4 * i));
    else if (descr === '<i8') out[i] = b.readBigInt64LE(start + 8 * i);
    else throw new Error(`${file}: ids must be <i4 or <i8, not ${descr}`);
  }
  return out;
}

// Writes a float32 tensor as a version 1 .npy file.
function writeNpy(file, tensor) {
  let h = `{'descr': '<f4', 'fortran_order': False, 'shape': (${tensor.dims.join(', ')},), }`;
  h += ' '.repeat(63 - ((10 + h.length) % 64)) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY\x01\x00', 0, 'latin1');
  head.writeUInt16LE(h.length, 8);
  const d = tensor.data;
  const fd = fs.openSync(file, 'w');
  fs.writeSync(fd, Buffer.concat([head, Buffer.from(h, 'latin1')]));
  fs.writeSync(fd, new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
  fs.closeSync(fd);
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const [model, idsFile, outFile] = a.pos;
  const ort = require(path.join(a.peers, 'node_modules', 'onnxruntime-node'));
  const opts = {intraOpNumThreads: a.threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all'};
  if (a.optimized) {
    opts.optimizedModelFilePath = a.optimized;
    opts.logSeverityLevel = 3;  // not the warning that the saved graph is for this CPU only
  }
  let t = performance.now();
  const session = await ort.InferenceSession.create(model, opts);
  const load = performance.now() - t;
  const ids = readIds(idsFile);
  const feeds = {[session.inputNames[0]]: new ort.Tensor('int64', ids, [1, ids.length])};
  const rounds = [];
  let shape = [];
  for (let r = 0; r < a.rounds; ++r) {
    t = performance.now();
    const out = (await session.run(feeds))[session.outputNames[0]];
    const run = performance.now() - t;
    t = performance.now();
    writeNpy(outFile, out);
    rounds.push({run_ms: run, save_ms: performance.now() - t});
    shape = out.dims;
  }
  console.log(JSON.stringify({ort: ort.env.versions.node, threads: a.threads, load_ms: load, rounds, shape}));
}

main().catch((e) => { console.error(`ort_run: ${e.message}`); process.exit(1); });
