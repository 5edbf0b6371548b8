// The waiting room's proof of work (see README, "Waiting room"), solved off
// the page's thread. Given a challenge and its difficulty `bits`, find the
// first decimal nonce such that SHA-256 of the ASCII text
// `${challenge}.${nonce}` starts with `bits` zero bits, and post back the
// proof `${challenge}.${nonce}`. Self-contained: SHA-256 is written out
// here (no third-party code, and no need for crypto.subtle, which plain
// http outside localhost lacks). The blocks of the text before the nonce
// are hashed once; each try costs one or two compressions.
"use strict";

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const INITIAL = [
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];
const W = new Int32Array(64);

// One SHA-256 compression of the 64 bytes at `bytes[offset..]` into `h`.
function compress(h, bytes, offset) {
  for (let i = 0; i < 16; i++) {
    const j = offset + i * 4;
    W[i] = (bytes[j] << 24) | (bytes[j + 1] << 16) | (bytes[j + 2] << 8) | bytes[j + 3];
  }
  for (let i = 16; i < 64; i++) {
    const a = W[i - 15], b = W[i - 2];
    const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
    const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
    W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
  }
  let a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const ch = (e & f) ^ (~e & g);
    const t1 = (k + S1 + ch + K[i] + W[i]) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const maj = (a & b) ^ (a & c) ^ (b & c);
    const t2 = (S0 + maj) | 0;
    k = g; g = f; f = e; e = (d + t1) | 0;
    d = c; c = b; b = a; a = (t1 + t2) | 0;
  }
  h[0] = (h[0] + a) | 0; h[1] = (h[1] + b) | 0; h[2] = (h[2] + c) | 0; h[3] = (h[3] + d) | 0;
  h[4] = (h[4] + e) | 0; h[5] = (h[5] + f) | 0; h[6] = (h[6] + g) | 0; h[7] = (h[7] + k) | 0;
}

function zeroBits(word) {
  return word === 0 ? 32 : Math.clz32(word);
}

// Leading zero bits of the digest in `h` (enough words for `bits`).
function leadingZeros(h, bits) {
  let n = 0;
  for (let i = 0; i < 8 && n < bits; i++) {
    const z = zeroBits(h[i]);
    n += z;
    if (z < 32) break;
  }
  return n;
}

function solve(challenge, bits) {
  const text = challenge + ".";
  const prefix = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) prefix[i] = text.charCodeAt(i) & 0xff;
  // The whole blocks before the nonce, hashed once.
  const whole = Math.floor(prefix.length / 64) * 64;
  const mid = new Int32Array(INITIAL);
  for (let off = 0; off < whole; off += 64) compress(mid, prefix, off);
  const tail = prefix.subarray(whole);
  const buf = new Uint8Array(192);
  const h = new Int32Array(8);
  const started = Date.now();
  for (let nonce = 0; ; nonce++) {
    const digits = String(nonce);
    let len = tail.length;
    buf.fill(0);
    buf.set(tail, 0);
    for (let i = 0; i < digits.length; i++) buf[len++] = digits.charCodeAt(i);
    buf[len] = 0x80;
    const total = prefix.length + digits.length;
    const blocks = len + 9 <= 64 ? 1 : 2;
    const end = blocks * 64;
    // The message length in bits, big-endian, in the last 8 bytes (a
    // challenge is far shorter than 2^32 bits).
    const lengthBits = total * 8;
    buf[end - 4] = (lengthBits >>> 24) & 0xff;
    buf[end - 3] = (lengthBits >>> 16) & 0xff;
    buf[end - 2] = (lengthBits >>> 8) & 0xff;
    buf[end - 1] = lengthBits & 0xff;
    h.set(mid);
    compress(h, buf, 0);
    if (blocks === 2) compress(h, buf, 64);
    if (leadingZeros(h, bits) >= bits) {
      return { proof: text + digits, hashes: nonce + 1, ms: Date.now() - started };
    }
    if ((nonce & 0xffff) === 0xffff) self.postMessage({ progress: nonce + 1 });
  }
}

self.onmessage = (event) => {
  const { challenge, bits } = event.data;
  self.postMessage(solve(String(challenge), Number(bits)));
};
