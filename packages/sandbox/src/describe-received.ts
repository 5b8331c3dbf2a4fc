/**
 * How an error message shows the value it was given (`received …`): the spawn-option errors of
 * @conch/sandbox and those of @conch/process.
 */
export function describeReceived(value: unknown): string {
  // A value as it was given, short: a 10 MB command must not become a 10 MB message.
  if (typeof value === 'string' && value.length > 200) {
    return `a string of ${value.length} characters (${JSON.stringify(value.slice(0, 60))}…)`;
  }
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}
