// A PNG writer for exactly one kind of image: 1-bit grayscale, no interlace, filter type None
// on every row. The caller hands over the scanlines already in PNG's layout (a filter byte, then
// the packed pixels); this adds the signature, the IHDR, IDAT and IEND chunks and their CRCs.
//
// Why our own writer rather than sharp: at identical decoded pixels (test/render/frame.test.ts
// checks that) it costs much less, for files of about the same size, both at zlib level 4
// (measured against sharp: docs/performance.md).
// Nearly all of ours is zlib; sharp adds a copy of the bitmap as 8-bit gray into libvips, a
// colour-space pass and hand-offs to its threads, which its faster zlib-ng does not make up.
// Row filters other than None buy nothing on two-colour text (deflate already finds the
// repeated rows) and would cost time.

import * as zlib from 'node:zlib';

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/**
 * zlib settings of the IDAT stream; the benchmark's deflate floor uses the same ones. Level 4,
 * measured in the runs that compared sharp: zlib's default 6 made files a little smaller but
 * deflated too slowly for a Gemini frame to reach the target of 200 frames per CPU second;
 * level 2 deflated faster but made files clearly larger than level 4, and left drawing a large
 * share of the total. Level 4 keeps every shape well above the target, with drawing a small
 * share of the time.
 */
export const DEFLATE_OPTIONS = { level: 4 } as const;

const CRC_TABLE = (() => {
  const t = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c;
  }
  return t;
})();

/** CRC-32 as PNG defines it (ISO 3309), over a chunk's type and data. */
export function crc32(buf: Uint8Array, crc = 0): number {
  let c = ~crc;
  for (let i = 0; i < buf.length; i++) c = CRC_TABLE[(c ^ buf[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

/**
 * zlib's own CRC-32 where Node has it (20.15 and later; the engines field still allows 20.9):
 * several times faster than the table loop over a frame's IDAT.
 */
const chunkCrc: (buf: Uint8Array) => number = typeof zlib.crc32 === 'function' ? (buf) => zlib.crc32(buf) : crc32;

function chunk(type: string, data: Buffer): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  data.copy(out, 8);
  out.writeUInt32BE(chunkCrc(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** Bytes of one scanline: the filter byte and ceil(width / 8) bytes of pixels. */
export function scanlineBytes(width: number): number {
  return 1 + ((width + 7) >> 3);
}

/**
 * The scanlines as one byte per pixel, 0 black and 255 white: what sharp takes as raw 1-channel
 * input and gives back when it decodes the PNG. For comparing against sharp (tests, benchmark).
 */
export function bilevelToGray(scanlines: Uint8Array, width: number, height: number): Buffer {
  const stride = scanlineBytes(width);
  const out = Buffer.alloc(width * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) out[y * width + x] = (scanlines[y * stride + 1 + (x >> 3)]! >> (7 - (x & 7))) & 1 ? 255 : 0;
  }
  return out;
}

/**
 * A 1-bit grayscale PNG (bit 1 is white) from `height` scanlines of `scanlineBytes(width)`
 * bytes each, every one starting with filter byte 0.
 */
export function encodeBilevelPng(scanlines: Uint8Array, width: number, height: number): Buffer {
  if (scanlines.length !== scanlineBytes(width) * height) throw new Error(`expected ${scanlineBytes(width) * height} bytes of scanlines, got ${scanlines.length}`);
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 1; // bit depth
  ihdr[9] = 0; // colour type: grayscale
  // compression, filter method and interlace stay 0: deflate, adaptive filtering, none.
  return Buffer.concat([SIGNATURE, chunk('IHDR', ihdr), chunk('IDAT', zlib.deflateSync(scanlines, DEFLATE_OPTIONS)), chunk('IEND', Buffer.alloc(0))]);
}
