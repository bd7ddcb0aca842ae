// snapcompact's frames, to look at: `frames` writes the PNGs a session's next request would
// show (through the daemon: the `frames` method, then payload.get for each), and `render`
// draws any text file in a model family's frame shape locally, without a daemon.
import fs from 'node:fs';
import path from 'node:path';
import { CliError, n } from '../io.ts';
import { positiveInt } from '../arguments.ts';
import type { VerbModule } from '../program.ts';

function outDir(dir: string): string {
  const abs = path.resolve(dir);
  try {
    fs.mkdirSync(abs, { recursive: true });
  } catch (err) {
    throw new CliError(`cannot create ${abs}: ${(err as Error).message}`, undefined, 'pass --out a folder you can write');
  }
  return abs;
}

export const frameVerbs: VerbModule = (program, run) => {
  program
    .command('frames')
    .description("write the snapcompact frames a session's next request would show, as PNG files (nothing compacts)")
    .argument('[session]', 'the session (default --session or ALBEDO_SESSION)')
    .requiredOption('--out <dir>', 'folder to write frame-NNN.png into (created if missing)')
    .option('--model <id>', 'the model to render for (default: the one the session last prepared for)')
    .action(
      run(async (ctx, given: string | undefined, opts: { out: string; model?: string }) => {
        const session = ctx.session(given);
        const r = await ctx.link.call('frames', { session, model: opts.model });
        const dir = outDir(opts.out);
        const files: string[] = [];
        for (const [i, f] of r.frames.entries()) {
          const p = await ctx.link.call('payload.get', { hash: f.hash });
          const file = path.join(dir, `frame-${String(i + 1).padStart(3, '0')}.png`);
          fs.writeFileSync(file, Buffer.from(p.data, 'base64'));
          files.push(file);
        }
        const st = ctx.out.style;
        const lines = r.frames.length === 0
          ? [st.dim(`no frames for ${session} (${r.model ?? 'no model yet'}): nothing archived, or the model reads no images`)]
          : r.frames.map((f, i) => `${files[i]}  ${st.dim(`${f.width}x${f.height}`)}  ${f.caption}`);
        return { json: { ...r, files }, text: lines.join('\n') };
      }),
    );

  program
    .command('render')
    .description("render a text file as snapcompact frames in a model family's shape, locally (no daemon)")
    .argument('<file>', 'the text file to render')
    .requiredOption('--out <dir>', 'folder to write frame-NNN.png into (created if missing)')
    .option('--model <id>', 'the model whose frame shape to use (default: the Claude shape)')
    .option('--max-edge <px>', "the upstream's largest image edge; frames are drawn narrower or shorter to fit", positiveInt)
    .action(
      run(async (_ctx, file: string, opts: { out: string; model?: string; maxEdge?: number }) => {
        let text: string;
        try {
          text = fs.readFileSync(file, 'utf8');
        } catch (err) {
          throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
        }
        const dir = outDir(opts.out);
        // Loaded only here: the glyph table is no cost every other verb (and `albedo status`) should pay.
        const { layout, renderFrame, shapeFor, shapeNameFor } = await import('../../render/index.ts');
        const frames = layout(text, shapeFor(undefined, opts.model), opts.maxEdge === undefined ? {} : { maxEdgePx: opts.maxEdge });
        const written = frames.map((f, i) => {
          const r = renderFrame(f);
          const out = path.join(dir, `frame-${String(i + 1).padStart(3, '0')}.png`);
          fs.writeFileSync(out, r.png);
          return { file: out, width: r.width, height: r.height, key: r.key, chars: f.text.length };
        });
        const shape = shapeNameFor(undefined, opts.model);
        const text2 = [`${n(written.length)} frame(s) in the ${shape} shape from ${n(text.length)} characters`, ...written.map((w) => `${w.file}  ${w.width}x${w.height}  ${n(w.chars)} chars`)].join('\n');
        return { json: { shape, frames: written }, text: text2 };
      }),
    );
};
