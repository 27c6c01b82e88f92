'use strict';
// Score a data file with an exported hyp2onnx graph in onnxruntime-web's
// WebAssembly backend, run here in Node.js (a browser page would do the same
// with `import * as ort from 'onnxruntime-web'` and a fetched model), on one
// thread, and print the outputs as one JSON object like predict-node.js.
// Usage: node predict-web.js MODEL.onnx DATA.npy

const fs = require('fs');
const ort = require('onnxruntime-web');
const { readPoints, asInputType, tensorToJson, parseArgs } = require('./points');

async function main() {
  const { model, data } = parseArgs('predict-web.js');
  ort.env.wasm.numThreads = 1; // one thread, no worker: same order of sums as onnxruntime-node
  const session = await ort.InferenceSession.create(fs.readFileSync(model), {
    executionProviders: ['wasm'],
  });
  const points = readPoints(data);
  const input = session.inputMetadata[0];
  const X = new ort.Tensor(input.type, asInputType(points, input.type), points.shape);
  const results = await session.run({ [session.inputNames[0]]: X });
  const out = {};
  for (const name of session.outputNames) out[name] = tensorToJson(results[name]);
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((err) => {
  process.stderr.write(`error: ${String(err.message || err).split('\n')[0]}\n`);
  process.exit(1);
});
