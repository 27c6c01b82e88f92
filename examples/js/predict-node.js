'use strict';
// Score a data file with an exported hyp2onnx graph in onnxruntime-node, on one
// thread, and print the outputs as one JSON object: {"label": [...],
// "probabilities": [[...], ...]} for classifiers, {"variable": [[...], ...]} for
// regressors. Usage: node predict-node.js MODEL.onnx DATA.npy

const ort = require('onnxruntime-node');
const { readPoints, asInputType, tensorToJson, parseArgs } = require('./points');

async function main() {
  const { model, data } = parseArgs('predict-node.js');
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
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
  process.stderr.write(`error: ${err.message.split('\n')[0]}\n`);
  process.exit(1);
});
