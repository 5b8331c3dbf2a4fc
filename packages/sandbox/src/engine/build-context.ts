import { isAbsolute, posix } from 'node:path';
import type { PolicyRefusal } from './engine-policy.js';

/**
 * What the proxy checks in a build context (the tar a `docker build` sends as the request body):
 * every Dockerfile in it — the one the request names, and any file called like one
 * (`Dockerfile`, `Containerfile`, `*.dockerfile`, `Dockerfile.*`, any case) — for the RUN flags
 * that reach past the build container: `--network=host`, `--security=insecure`, `--device`, and
 * `--mount` of a bind or cache source given as an absolute path or through `..` (BuildKit reads
 * those inside the context; buildah before 1.35 read them on the host: CVE-2024-1753). A flag
 * whose value uses a variable (`$SRC`) is refused: what it expands to is decided by the builder.
 * Plain and gzip tars are read; other compressions are refused (nothing to read them with here).
 */

/** The largest Dockerfile the proxy reads (a bigger one is refused, not skipped). */
export const MAX_DOCKERFILE_BYTES = 1024 * 1024;

const BLOCK = 512;

/** A file of the context the scanner kept (a Dockerfile candidate). */
interface KeptEntry {
  name: string;
  /** '0' file, '1' hard link, '2' symbolic link, … (tar typeflag). */
  type: string;
  data: Buffer;
  /** Bigger than MAX_DOCKERFILE_BYTES: data is not kept. */
  tooBig: boolean;
}

function isDockerfileName(name: string): boolean {
  const base = posix.basename(name).toLowerCase();
  return (
    base === 'dockerfile' ||
    base === 'containerfile' ||
    base.startsWith('dockerfile.') ||
    base.startsWith('containerfile.') ||
    base.endsWith('.dockerfile') ||
    base.endsWith('.containerfile')
  );
}

function normalizeEntryName(name: string): string {
  let n = name.replace(/\/+$/, '');
  while (n.startsWith('./')) n = n.slice(2);
  return posix.normalize(n || '.');
}

function readString(block: Buffer, start: number, length: number): string {
  const field = block.subarray(start, start + length);
  const end = field.indexOf(0);
  return field.subarray(0, end < 0 ? field.length : end).toString('utf8');
}

function readSize(block: Buffer): number | undefined {
  const field = block.subarray(124, 136);
  if (field[0]! & 0x80) {
    // base-256 (GNU) for sizes past 8 GiB
    let n = 0;
    for (let i = 1; i < field.length; i++) n = n * 256 + field[i]!;
    return Number.isSafeInteger(n) ? n : undefined;
  }
  const text = readString(block, 124, 12).trim();
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text)) return undefined;
  return parseInt(text, 8);
}

/** PAX extended header records: `<len> key=value\n`. */
function paxPath(data: Buffer): string | undefined {
  let path: string | undefined;
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    if (space < 0) break;
    const length = parseInt(data.subarray(at, space).toString('ascii'), 10);
    if (!Number.isFinite(length) || length <= 0) break;
    const record = data.subarray(space + 1, at + length - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq > 0 && record.slice(0, eq) === 'path') path = record.slice(eq + 1);
    at += length;
  }
  return path;
}

/**
 * Reads a tar stream chunk by chunk (any boundaries) and keeps the Dockerfile candidates. Headers
 * it cannot read make the context unreadable: the build is refused.
 */
export class TarScanner {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private remaining = 0;
  private padding = 0;
  private current: { name: string; type: string; keep: boolean; chunks: Buffer[]; size: number } | undefined;
  private nextName: string | undefined;
  private meta: { kind: 'L' | 'x'; chunks: Buffer[] } | undefined;
  private ended = false;
  private zeroBlocks = 0;
  readonly kept: KeptEntry[] = [];
  /** Why the tar could not be read, when it could not. */
  error: string | undefined;
  private readonly wanted: (name: string) => boolean;

  constructor(wanted: (name: string) => boolean) {
    this.wanted = wanted;
  }

  push(chunk: Buffer): void {
    if (this.ended || this.error) return;
    let offset = 0;
    while (offset < chunk.length && !this.ended && !this.error) {
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, chunk.length - offset);
        this.consumeData(chunk.subarray(offset, offset + take));
        this.remaining -= take;
        offset += take;
        if (this.remaining === 0) this.finishEntry();
        continue;
      }
      if (this.padding > 0) {
        const take = Math.min(this.padding, chunk.length - offset);
        this.padding -= take;
        offset += take;
        continue;
      }
      const need = BLOCK - this.pendingBytes;
      const take = Math.min(need, chunk.length - offset);
      this.pending.push(chunk.subarray(offset, offset + take));
      this.pendingBytes += take;
      offset += take;
      if (this.pendingBytes === BLOCK) {
        const block = Buffer.concat(this.pending);
        this.pending = [];
        this.pendingBytes = 0;
        this.header(block);
      }
    }
  }

  /** Whether the stream ended where a tar may end (two zero blocks, or at an entry boundary). */
  finish(): void {
    if (this.error) return;
    if (!this.ended && (this.remaining > 0 || this.padding > 0 || this.pendingBytes > 0 || this.current)) {
      this.error = 'the build context ends in the middle of a tar entry';
    }
  }

  private header(block: Buffer): void {
    if (block.every((b) => b === 0)) {
      if (++this.zeroBlocks >= 2) this.ended = true;
      return;
    }
    this.zeroBlocks = 0;
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : block[i]!;
    const stored = parseInt(readString(block, 148, 8).trim() || 'x', 8);
    if (stored !== sum) {
      this.error = 'the build context is not a tar archive the proxy can read (bad header checksum)';
      return;
    }
    const size = readSize(block);
    if (size === undefined) {
      this.error = 'the build context has a tar entry with an unreadable size';
      return;
    }
    const type = String.fromCharCode(block[156]!) === '\0' ? '0' : String.fromCharCode(block[156]!);
    let name = readString(block, 0, 100);
    if (readString(block, 257, 5) === 'ustar') {
      const prefix = readString(block, 345, 155);
      if (prefix) name = `${prefix}/${name}`;
    }
    if (type === 'L' || type === 'x') {
      this.meta = { kind: type, chunks: [] };
    } else if (type === 'g' || type === 'K') {
      this.meta = undefined;
    } else {
      const full = normalizeEntryName(this.nextName ?? name);
      this.nextName = undefined;
      this.current = { name: full, type, keep: this.wanted(full), chunks: [], size };
    }
    this.remaining = size;
    this.padding = (BLOCK - (size % BLOCK)) % BLOCK;
    if (size === 0) this.finishEntry();
  }

  private consumeData(data: Buffer): void {
    if (this.meta) {
      if (this.meta.chunks.reduce((n, c) => n + c.length, 0) + data.length > 64 * 1024) {
        this.error = 'the build context has an oversized tar extended header';
        return;
      }
      this.meta.chunks.push(Buffer.from(data));
      return;
    }
    const current = this.current;
    if (current?.keep && current.size <= MAX_DOCKERFILE_BYTES) current.chunks.push(Buffer.from(data));
  }

  private finishEntry(): void {
    if (this.meta) {
      const data = Buffer.concat(this.meta.chunks);
      if (this.meta.kind === 'L') this.nextName = data.toString('utf8').replace(/\0+$/, '');
      else this.nextName = paxPath(data) ?? this.nextName;
      this.meta = undefined;
      return;
    }
    const current = this.current;
    this.current = undefined;
    if (!current?.keep) return;
    const tooBig = current.size > MAX_DOCKERFILE_BYTES;
    this.kept.push({
      name: current.name,
      type: current.type,
      data: tooBig ? Buffer.alloc(0) : Buffer.concat(current.chunks),
      tooBig,
    });
  }
}

/** The compression a context starts with ('none' for a plain tar). */
export function contextCompression(head: Buffer): 'none' | 'gzip' | 'bzip2' | 'xz' | 'zstd' {
  if (head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  if (head.subarray(0, 3).toString('latin1') === 'BZh') return 'bzip2';
  if (head.subarray(0, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]))) return 'xz';
  if (head.subarray(0, 4).equals(Buffer.from([0x28, 0xb5, 0x2f, 0xfd]))) return 'zstd';
  return 'none';
}

/** The Dockerfile path a build request names (query `dockerfile`), normalised; undefined for the default. */
export function namedDockerfile(query: URLSearchParams): string | undefined {
  const given = query.get('dockerfile');
  return given ? normalizeEntryName(given) : undefined;
}

/** Which entries of a context the scanner keeps for a request naming `dockerfile` (or none). */
export function dockerfileCandidates(dockerfile: string | undefined): (name: string) => boolean {
  return (name) => name === dockerfile || isDockerfileName(name);
}

/**
 * Judges the Dockerfiles a scanner kept: the named one (or the default `Dockerfile` /
 * `Containerfile`) must be a regular file; every candidate's RUN flags are checked.
 */
export function checkBuildContext(
  scanner: TarScanner,
  dockerfile: string | undefined,
): PolicyRefusal | undefined {
  if (scanner.error) return { rule: 'build-context', message: scanner.error };
  const primary = new Set(dockerfile ? [dockerfile] : ['Dockerfile', 'Containerfile']);
  for (const entry of scanner.kept) {
    const isPrimary = primary.has(entry.name);
    if (entry.type !== '0' && entry.type !== '7') {
      if (isPrimary) {
        return {
          rule: 'build-context',
          message: `the Dockerfile ${JSON.stringify(entry.name)} is a link in the build context; the proxy reads only a regular Dockerfile`,
        };
      }
      continue;
    }
    if (entry.tooBig) {
      return {
        rule: 'build-context',
        message: `${JSON.stringify(entry.name)} is larger than ${MAX_DOCKERFILE_BYTES} bytes`,
      };
    }
    const refusal = checkDockerfile(entry.data.toString('utf8'), entry.name);
    if (refusal) return refusal;
  }
  return undefined;
}

/** A Dockerfile's instructions, continuation lines joined, comments dropped. */
export function dockerfileInstructions(text: string): string[] {
  const lines = text.split(/\r?\n/);
  let escape = '\\';
  // Parser directives: only at the very top, before any instruction or other comment.
  for (const line of lines) {
    const m = /^#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$/.exec(line);
    if (!m) break;
    if (m[1]!.toLowerCase() === 'escape' && (m[2] === '`' || m[2] === '\\')) escape = m[2];
  }
  const instructions: string[] = [];
  let current = '';
  for (const line of lines) {
    if (current === '' && /^\s*(#|$)/.test(line)) continue;
    // Comment lines inside a continued instruction are dropped too.
    if (current !== '' && /^\s*#/.test(line)) continue;
    const trimmed = line.replace(/\s+$/, '');
    if (trimmed.endsWith(escape)) {
      current += `${trimmed.slice(0, -1)} `;
      continue;
    }
    current += trimmed;
    if (current.trim() !== '') instructions.push(current.trim());
    current = '';
  }
  if (current.trim() !== '') instructions.push(current.trim());
  return instructions;
}

/** Splits `a=b,c="d,e"` (the --mount value) into pairs; quotes as BuildKit's CSV reader takes them. */
function csvPairs(value: string): Map<string, string> {
  const pairs = new Map<string, string>();
  const fields: string[] = [];
  let field = '';
  let quote: string | undefined;
  for (const c of value) {
    if (quote) {
      if (c === quote) quote = undefined;
      else field += c;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === ',') {
      fields.push(field);
      field = '';
    } else field += c;
  }
  fields.push(field);
  for (const f of fields) {
    const eq = f.indexOf('=');
    const key = (eq < 0 ? f : f.slice(0, eq)).trim().toLowerCase();
    pairs.set(key, eq < 0 ? 'true' : f.slice(eq + 1).trim());
  }
  return pairs;
}

/** The `--flag[=value]` words at the start of a RUN instruction's arguments. */
function runFlags(args: string): { name: string; value: string }[] {
  const flags: { name: string; value: string }[] = [];
  let rest = args.trimStart();
  while (rest.startsWith('--')) {
    // A flag ends at unquoted whitespace.
    let i = 0;
    let quote: string | undefined;
    for (; i < rest.length; i++) {
      const c = rest[i]!;
      if (quote) {
        if (c === quote) quote = undefined;
      } else if (c === '"' || c === "'") quote = c;
      else if (/\s/.test(c)) break;
    }
    const word = rest.slice(2, i);
    const eq = word.indexOf('=');
    flags.push({
      name: (eq < 0 ? word : word.slice(0, eq)).toLowerCase(),
      value: eq < 0 ? '' : word.slice(eq + 1),
    });
    rest = rest.slice(i).trimStart();
  }
  return flags;
}

function escapesContext(source: string): boolean {
  return isAbsolute(source) || source.split(/[/\\]+/).includes('..');
}

/** Judges one Dockerfile's RUN instructions (ONBUILD RUN too). */
export function checkDockerfile(text: string, name = 'Dockerfile'): PolicyRefusal | undefined {
  for (const instruction of dockerfileInstructions(text)) {
    let m = /^(\S+)\s*([\s\S]*)$/.exec(instruction);
    if (!m) continue;
    let keyword = m[1]!.toUpperCase();
    let args = m[2]!;
    if (keyword === 'ONBUILD') {
      m = /^(\S+)\s*([\s\S]*)$/.exec(args);
      if (!m) continue;
      keyword = m[1]!.toUpperCase();
      args = m[2]!;
    }
    if (keyword !== 'RUN') continue;
    const where = `${name}: RUN ${args.length > 80 ? `${args.slice(0, 80)}…` : args}`;
    for (const flag of runFlags(args)) {
      if (flag.value.includes('$')) {
        return {
          rule: 'build-mount',
          message: `RUN --${flag.name} takes its value from a variable, which the builder expands (${where})`,
        };
      }
      const value = flag.value.replace(/^(["'])(.*)\1$/, '$2');
      if (flag.name === 'network') {
        if (value.toLowerCase() === 'host') {
          return { rule: 'host-namespace', message: `RUN --network=host uses the host's network (${where})` };
        }
      } else if (flag.name === 'security') {
        if (value.toLowerCase() !== 'sandbox') {
          return {
            rule: 'privileged',
            message: `RUN --security=${value} runs the step privileged (${where})`,
          };
        }
      } else if (flag.name === 'device') {
        return { rule: 'devices', message: `RUN --device gives the step a host device (${where})` };
      } else if (flag.name === 'mount') {
        const pairs = csvPairs(value);
        const type = (pairs.get('type') ?? 'bind').toLowerCase();
        const source = pairs.get('source') ?? pairs.get('src');
        if ((type === 'bind' || type === 'cache') && !pairs.has('from') && source && escapesContext(source)) {
          return {
            rule: 'build-mount',
            message: `RUN --mount=type=${type} with source ${JSON.stringify(source)} names a path outside the build context (${where})`,
          };
        }
        if (!['bind', 'cache', 'tmpfs', 'secret', 'ssh'].includes(type)) {
          return { rule: 'build-mount', message: `RUN --mount of type ${JSON.stringify(type)} (${where})` };
        }
      } else {
        return {
          rule: 'build-option',
          message: `RUN --${flag.name} is not a flag the proxy knows (${where})`,
        };
      }
    }
  }
  return undefined;
}
