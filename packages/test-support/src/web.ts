// Web helpers for browser tests: a small static site served by a background command, real PNG
// decoding (valid and not blank), and whether a CDP endpoint answers.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PNG } from 'pngjs';

/** A page with a known title, text and a red block at the top left (100x100 CSS px). */
export const PAGE_HTML = `<!doctype html>
<html><head><title>conch test page</title>
<style>body{margin:0;background:#fff;font:16px sans-serif} #red{width:100px;height:100px;background:#ff0000}</style>
</head><body><div id="red"></div><h1>Hello from conch</h1><p>The browser tools read this paragraph.</p>
<a href="/other.html">other page</a></body></html>`;

/** Writes the test site (index.html, other.html) under `dir/site` and returns that directory. */
export function writeSite(dir: string): string {
  const site = join(dir, 'site');
  mkdirSync(site, { recursive: true });
  writeFileSync(join(site, 'index.html'), PAGE_HTML);
  writeFileSync(join(site, 'other.html'), '<!doctype html><title>other</title><p>second page</p>');
  return site;
}

/** The command that serves `site` on a free port of 127.0.0.1 and prints the port (unbuffered). */
export function serveCommand(site: string): string {
  return `python3 -u -m http.server 0 --bind 127.0.0.1 --directory ${site}`;
}

/** The port python's http.server announced ("Serving HTTP on 127.0.0.1 port 41235"), if it did yet. */
export function announcedPort(output: string): number | undefined {
  const match = /Serving HTTP on \S+ port (\d+)/.exec(output);
  return match ? Number(match[1]) : undefined;
}

export interface DecodedPng {
  width: number;
  height: number;
  /** Distinct RGBA colours (counted up to 10,000). */
  distinctColors: number;
  /** RGBA at (x, y). */
  at(x: number, y: number): [number, number, number, number];
}

/** Decodes a PNG file for real (throws on an invalid one). */
export function decodePng(path: string): DecodedPng {
  const png = PNG.sync.read(readFileSync(path));
  const colors = new Set<number>();
  for (let i = 0; i < png.data.length && colors.size < 10_000; i += 4) colors.add(png.data.readUInt32BE(i));
  return {
    width: png.width,
    height: png.height,
    distinctColors: colors.size,
    at(x, y) {
      const i = (png.width * y + x) * 4;
      return [png.data[i]!, png.data[i + 1]!, png.data[i + 2]!, png.data[i + 3]!];
    },
  };
}

/** Whether `GET <httpUrl>/json/version` answers with a browser's WebSocket URL. */
export async function answersCdp(httpUrl: string): Promise<boolean> {
  try {
    const res = await fetch(`${httpUrl}/json/version`, { signal: AbortSignal.timeout(2000) });
    return (
      res.ok &&
      typeof ((await res.json()) as { webSocketDebuggerUrl?: unknown }).webSocketDebuggerUrl === 'string'
    );
  } catch {
    return false;
  }
}
