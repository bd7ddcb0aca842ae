// A PNG writer for exactly one kind of image: 1-bit grayscale, no interlace, filter type None
// on every row. The caller hands over the scanlines already in PNG's layout (a filter byte, then
// the packed pixels); this adds the signature, the IHDR, IDAT and IEND chunks and their CRCs.
//
// Why our own writer rather than sharp: at identical decoded pixels (test/render/frame.test.ts
// checks that) it costs less. Measured 2026-12-01 on this 2-core machine, one frame of source
// code per shape, the two encoders interleaved 60 times, medians (the machine was shared, load
// average 16, so absolute times are inflated; the order held in every run):
//   Claude 1562x704:  ours 4.9 ms (4.3 ms CPU), sharp 16.5 ms (5.3 ms CPU, its threads counted)
//   GPT 1568x1232:    ours 4.4 ms (4.5 ms CPU), sharp 8.5 ms (6.5 ms CPU)
//   Gemini 2048x1408: ours 6.9 ms (7.0 ms CPU), sharp 15.7 ms (8.4 ms CPU)
// with files within 1-2% of each other in size. Nearly all of our time is zlib; sharp adds a copy
// of the bitmap as 8-bit gray into libvips, a colour-space pass and its thread hand-offs (its
// bundled zlib-ng does not make up for that at these sizes). `npm run bench -- --only frames`
// measures it again. Row filters other than None buy nothing on two-colour text (deflate's
// window already finds the repeated rows) and would only cost time.

import { deflateSync } from 'node:zlib';

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** zlib settings of the IDAT stream; the benchmark's deflate floor uses the same ones. */
export const DEFLATE_OPTIONS = { level: 6 } as const;

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

function chunk(type: string, data: Buffer): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** Bytes of one scanline: the filter byte and ceil(width / 8) bytes of pixels. */
export function scanlineBytes(width: number): number {
  return 1 + ((width + 7) >> 3);
}

/**
 * A 1-bit grayscale PNG (bit 1 is white) from `height` scanlines of `scanlineBytes(width)`
 * bytes each, every one starting with filter byte 0.
 */
export function encodeBilevelPng(scanlines: Buffer, width: number, height: number): Buffer {
  if (scanlines.length !== scanlineBytes(width) * height) throw new Error(`expected ${scanlineBytes(width) * height} bytes of scanlines, got ${scanlines.length}`);
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 1; // bit depth
  ihdr[9] = 0; // colour type: grayscale
  // compression, filter method and interlace stay 0: deflate, adaptive filtering, none.
  return Buffer.concat([SIGNATURE, chunk('IHDR', ihdr), chunk('IDAT', deflateSync(scanlines, DEFLATE_OPTIONS)), chunk('IEND', Buffer.alloc(0))]);
}
