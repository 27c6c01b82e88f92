'use strict';
// Read the points to score: a .npy file (float32 or float64, C order, 2-D) or a
// JSON file holding an array of rows. Shared by predict-node.js and predict-web.js.

const fs = require('fs');

/**
 * Parse a NumPy .npy file (format 1.0-3.0) of little-endian float32/float64.
 * @returns {{data: Float32Array|Float64Array, shape: number[], dtype: string}}
 */
function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.subarray(0, 6).toString('latin1') !== '\x93NUMPY') {
    throw new Error(`${path}: not a .npy file`);
  }
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.subarray(major === 1 ? 10 : 12, start).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const fortran = /'fortran_order':\s*(True|False)/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new Error(`${path}: unreadable .npy header ${header}`);
  if (fortran[1] === 'True') throw new Error(`${path}: Fortran-ordered arrays are not supported`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  if (dims.length !== 2) throw new Error(`${path}: expected a 2-D array, got shape (${dims})`);
  const types = { '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array] };
  if (!(descr[1] in types)) throw new Error(`${path}: dtype ${descr[1]} is not float32/float64`);
  const [dtype, Typed] = types[descr[1]];
  const count = dims[0] * dims[1];
  // copy to an aligned buffer: the data offset need not be a multiple of 8
  const bytes = buf.subarray(start, start + count * Typed.BYTES_PER_ELEMENT);
  const data = new Typed(new Uint8Array(bytes).buffer);
  return { data, shape: dims, dtype };
}

/** Parse a JSON array of equally long rows of numbers (taken as float64). */
function readJson(path) {
  const rows = JSON.parse(fs.readFileSync(path, 'utf8'));
  if (!Array.isArray(rows) || rows.length === 0 || !rows.every(Array.isArray)) {
    throw new Error(`${path}: expected a JSON array of rows`);
  }
  const width = rows[0].length;
  if (!rows.every((r) => r.length === width)) throw new Error(`${path}: rows differ in length`);
  return { data: Float64Array.from(rows.flat()), shape: [rows.length, width], dtype: 'float64' };
}

/** The points in `path` (.npy or .json), as a typed array, shape and dtype. */
function readPoints(path) {
  return path.toLowerCase().endsWith('.json') ? readJson(path) : readNpy(path);
}

/** Convert the points to the graph's input type ('float32' or 'float64'). */
function asInputType(points, elemType) {
  const Typed = { float32: Float32Array, float64: Float64Array }[elemType];
  if (!Typed) throw new Error(`the graph's input type ${elemType} is not float32/float64`);
  return points.data instanceof Typed ? points.data : Typed.from(points.data);
}

/** One output tensor as nested JSON-able arrays (int64 labels as numbers). */
function tensorToJson(tensor) {
  const flat = Array.from(tensor.data, (v) => (typeof v === 'bigint' ? Number(v) : v));
  if (tensor.dims.length < 2) return flat;
  const width = tensor.dims[tensor.dims.length - 1];
  const rows = [];
  for (let i = 0; i < flat.length; i += width) rows.push(flat.slice(i, i + width));
  return rows;
}

/** Parse `MODEL DATA` from the command line or exit with a usage line. */
function parseArgs(script) {
  const args = process.argv.slice(2);
  if (args.length !== 2) {
    process.stderr.write(`usage: node ${script} MODEL.onnx|MODEL.ort DATA.npy|DATA.json\n`);
    process.exit(2);
  }
  return { model: args[0], data: args[1] };
}

module.exports = { readPoints, asInputType, tensorToJson, parseArgs };
