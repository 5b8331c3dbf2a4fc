import type { LineFacts, Part } from '../facts.js';
import { match } from './download-to-interpreter.js';

/**
 * Rule `safety:sourceDownloaded`: `eval`, `source` or `.` of downloaded content in any spelling
 * (`eval "$(curl …)"`, `source <(wget -qO- …)`, `curl … | source /dev/stdin`) is denied.
 */
export function sourceDownloaded(line: LineFacts): Part[] {
  return match(line, true, 'sourceDownloaded');
}
