/**
 * Removes terminal control sequences from text meant for a model: CSI (colours, cursor moves),
 * OSC (titles, hyperlinks; BEL or ST terminated), DCS/SOS/PM/APC strings, two-byte escapes and
 * charset designations. Plain text, tabs and newlines are kept.
 */
const ANSI =
  // eslint-disable-next-line no-control-regex
  /\u001b\][\s\S]*?(?:\u0007|\u001b\\|$)|\u001b[PX^_][\s\S]*?(?:\u001b\\|$)|(?:\u001b\[|\u009b)[0-?]*[ -/]*[@-~]|\u001b[()*+#%][0-9A-Za-z@]|\u001b[ -/]*[0-~]/g;

// eslint-disable-next-line no-control-regex
const HAS_ESC = /[\u001b\u009b]/;

export function stripAnsi(text: string): string {
  if (!HAS_ESC.test(text)) return text;
  return text.replace(ANSI, '');
}

/**
 * Text as a model should read it: ANSI/OSC stripped, CRLF normalised, and lines rewritten with a
 * bare `\r` (progress bars) collapsed to what a terminal would finally show.
 */
export function cleanForModel(text: string): string {
  let out = stripAnsi(text);
  if (out.includes('\r')) {
    out = out.replace(/\r+\n/g, '\n');
    if (out.includes('\r')) {
      out = out
        .split('\n')
        .map((line) => {
          if (!line.includes('\r')) return line;
          const parts = line.split('\r').filter((p) => p.length > 0);
          return parts.length === 0 ? '' : parts[parts.length - 1]!;
        })
        .join('\n');
    }
  }
  return out;
}
