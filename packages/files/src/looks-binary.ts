/** Bytes of a file's start that binary detection looks at. */
export const SNIFF_BYTES = 8192;

/**
 * Whether a buffer's start looks binary: a NUL byte, or mostly bytes that are not UTF-8 (more than
 * 30% replacement characters once decoded; a sequence cut at the end of the sample is not counted).
 */
export function looksBinary(sample: Uint8Array): boolean {
  if (sample.length === 0) return false;
  if (sample.includes(0)) return true;
  const text = new TextDecoder('utf-8', { fatal: false }).decode(
    sample.subarray(0, Math.max(0, sample.length - 3)),
  );
  let bad = 0;
  for (const ch of text) if (ch === '\uFFFD') bad++;
  return text.length > 0 && bad / text.length > 0.3;
}
