import { TextDecoder } from 'node:util';

/** Small UTF-8 helpers used when a byte window is cut out of a stream. */

/** Length of `bytes` without a trailing incomplete UTF-8 sequence (so a cut never splits a char). */
export function completeUtf8Prefix(bytes: Uint8Array): number {
  const len = bytes.length;
  // Look back at most 3 bytes for the start of a multi-byte sequence.
  for (let back = 1; back <= Math.min(3, len); back++) {
    const b = bytes[len - back]!;
    if ((b & 0xc0) === 0x80) continue; // continuation byte: keep looking for the lead
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return need > back ? len - back : len;
  }
  return len;
}

/** Offset of the first byte that is not a UTF-8 continuation byte (at most 3 skipped). */
export function utf8StartOffset(bytes: Uint8Array): number {
  let i = 0;
  while (i < 3 && i < bytes.length && (bytes[i]! & 0xc0) === 0x80) i++;
  return i;
}

const decoder = new TextDecoder('utf-8', { fatal: false });

/** Decodes bytes; invalid sequences become U+FFFD, never a throw. */
export function decodeUtf8(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

/**
 * Whether a sample looks binary: a NUL byte, or more than 10% (and more than 3) of the decoded characters are
 * replacement characters (invalid UTF-8) or other control characters.
 */
export function looksBinary(sample: Uint8Array): boolean {
  if (sample.length === 0) return false;
  if (sample.indexOf(0) !== -1) return true;
  const text = decodeUtf8(sample);
  let bad = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0xfffd || (c < 0x20 && c !== 9 && c !== 10 && c !== 13 && c !== 27 && c !== 12 && c !== 8))
      bad++;
  }
  return bad > 3 && bad > text.length * 0.1;
}
