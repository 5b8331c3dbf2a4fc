import { Box, render, Static, Text, useApp, useInput, useStdout } from 'ink';
import { useEffect, useRef, useState } from 'react';
import type { ApprovalQueue, PendingApproval } from './approvals.js';
import type { ChatController, ChatItem } from './chat.js';
import { truncate } from './commands.js';
import { formatDuration, type ProcessRow, type ProcessTracker } from './processes.js';

/** Keys pressed this soon after an approval prompt appears are ignored (typeahead). */
const PROMPT_GUARD_MS = 300;

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export interface AppProps {
  chat: ChatController;
  approvals: ApprovalQueue;
  tracker: ProcessTracker;
  modelLabel: string;
  scripted: boolean;
  notes: string[];
  /** Messages sent at start (the walkthrough). */
  initial: string[];
  /** Disposes the registry and ends the process. */
  onExit: () => Promise<void>;
  /** Set by the app so `!logs` can open the pager. */
  registerPager: (open: (id: string, text: string) => void) => void;
}

interface Pager {
  title: string;
  lines: string[];
  offset: number;
}

/** Re-renders when a store changes; the store is read through its own accessors. */
function useStore(store: { subscribe: (listener: () => void) => () => void }): void {
  const [, setVersion] = useState(0);
  useEffect(() => store.subscribe(() => setVersion((v) => v + 1)), [store]);
}

function useNow(intervalMs: number): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), intervalMs);
    return () => clearInterval(timer);
  }, [intervalMs]);
  return now;
}

export function App(props: AppProps) {
  const { chat, approvals, tracker } = props;
  const { exit } = useApp();
  useStore(chat);
  useStore(approvals);
  useStore(tracker);
  const now = useNow(chat.busy ? 100 : 500);
  const [input, setInputState] = useState('');
  const inputRef = useRef('');
  const setInput = (value: string) => {
    inputRef.current = value;
    setInputState(value);
  };
  const [pager, setPagerState] = useState<Pager | undefined>();
  const pagerRef = useRef<Pager | undefined>(undefined);
  const setPager = (value: Pager | undefined) => {
    pagerRef.current = value;
    setPagerState(value);
  };
  const [exiting, setExiting] = useState(false);
  const [hint, setHint] = useState<string | undefined>();
  const approval = approvals.current();
  const promptShownAt = useRef(0);
  const shownId = useRef<number | undefined>(undefined);
  if (approval && shownId.current !== approval.id) {
    shownId.current = approval.id;
    promptShownAt.current = Date.now();
  }
  const { stdout } = useStdout();
  const rows = stdout.rows || 24;
  const columns = stdout.columns || 80;

  useEffect(() => {
    props.registerPager((id, text) => setPager({ title: `!logs ${id}`, lines: text.split('\n'), offset: 0 }));
    if (props.initial.length > 0) {
      void (async () => {
        for (const message of props.initial) await chat.submit(message);
      })();
    }
  }, []);

  // Lines sent so far, for ↑/↓ recall; `historyAt` is the recalled index (length = a new line).
  const history = useRef<string[]>([]);
  const historyAt = useRef(0);
  const submit = () => {
    const line = inputRef.current;
    setInput('');
    setHint(undefined);
    if (line.trim() && history.current.at(-1) !== line) history.current.push(line);
    historyAt.current = history.current.length;
    void chat.submit(line);
  };
  const recall = (step: -1 | 1) => {
    const at = Math.min(history.current.length, Math.max(0, historyAt.current + step));
    historyAt.current = at;
    setInput(history.current[at] ?? '');
  };

  const quit = () => {
    if (exiting) return;
    setExiting(true);
    approvals.denyAll();
    void props.onExit().finally(() => exit());
  };

  type Key = Parameters<Parameters<typeof useInput>[0]>[1];
  const plainKey = {} as Key;

  /** One keypress (a chunk of pasted or fast-typed text is fed one character at a time). */
  const onKey = (char: string, key: Key, pasted = false) => {
    const pager = pagerRef.current;
    if (pager) {
      const page = Math.max(1, rows - 6);
      const max = Math.max(0, pager.lines.length - page);
      let offset = pager.offset;
      if (char === 'q' || key.escape) return setPager(undefined);
      if (char === ' ' || char === 'f' || key.pageDown) offset += page;
      else if (char === 'b' || key.pageUp) offset -= page;
      else if (char === 'j' || key.downArrow || key.return || char === '\r') offset += 1;
      else if (char === 'k' || key.upArrow) offset -= 1;
      else if (char === 'g') offset = 0;
      else if (char === 'G') offset = max;
      return setPager({ ...pager, offset: Math.min(max, Math.max(0, offset)) });
    }
    const pending = approvals.current();
    if (pending) {
      // Typeahead and pastes never answer a prompt: only a key pressed after it appeared does.
      if (pasted || Date.now() - promptShownAt.current < PROMPT_GUARD_MS) return;
      const c = char.toLowerCase();
      const answer = c === 'y' ? 'once' : c === 'a' ? 'always' : c === 'n' || key.escape ? 'deny' : undefined;
      if (answer) approvals.answer(pending.id, answer);
      return;
    }
    if (key.return || char === '\r' || char === '\n') return submit();
    if (key.backspace || key.delete) return setInput(inputRef.current.slice(0, -1));
    if (key.ctrl && char === 'u') return setInput('');
    if (key.upArrow) return recall(-1);
    if (key.downArrow) return recall(1);
    if (key.ctrl || key.meta || key.tab || key.leftArrow || key.rightArrow) return;
    setInput(inputRef.current + char);
  };

  useInput((char, key) => {
    if (key.ctrl && char === 'c') {
      if (chat.busy && !chat.cancelling) {
        chat.cancel();
        setHint('cancelling… press Ctrl+C again to exit');
      } else quit();
      return;
    }
    if (exiting) return;
    // Terminals (and tmux) may deliver several keys in one chunk, e.g. "q!ps\r".
    if (char.length > 1 && !key.ctrl && !key.meta) {
      for (const c of char) onKey(c, plainKey, true);
      return;
    }
    onKey(char, key);
  });

  // Finished items go to <Static> (printed once, scroll back works); the rest stays live.
  const firstLive = chat.items.findIndex((item) => !isFinal(item));
  const done = firstLive < 0 ? chat.items : chat.items.slice(0, firstLive);
  const live = firstLive < 0 ? [] : chat.items.slice(firstLive);
  const processRows = tracker
    .rows()
    .filter((r) => r.running || (r.endedAt !== undefined && now - r.endedAt < 15_000));

  return (
    <>
      <Static items={[{ id: 0, kind: 'header' as const }, ...done]}>
        {(item) =>
          item.kind === 'header' ? (
            <Header
              key="header"
              modelLabel={props.modelLabel}
              scripted={props.scripted}
              notes={props.notes}
            />
          ) : (
            <Item key={item.id} item={item} now={now} approval={undefined} width={columns} />
          )
        }
      </Static>
      {pager ? (
        <Pager title={pager.title} lines={pager.lines} offset={pager.offset} height={Math.max(1, rows - 6)} />
      ) : (
        <Box flexDirection="column">
          {live.map((item) => (
            <Item key={item.id} item={item} now={now} approval={approval} width={columns} />
          ))}
          <ProcessPanel rows={processRows} now={now} width={columns} />
          {exiting ? (
            <Text color="yellow">disposing the registry: stopping every process it started…</Text>
          ) : approval ? (
            <ApprovalPrompt approval={approval} />
          ) : (
            <Box>
              <Text color="cyan">{chat.busy ? '… ' : '› '}</Text>
              <Text>{input}</Text>
              <Text inverse> </Text>
            </Box>
          )}
          <Text dimColor>
            {hint ??
              (chat.busy ? 'Ctrl+C cancel the running tool · ' : '') +
                'Enter send · !ps !kill <id> !kill-all !logs <id> !help · Ctrl+C exit'}
          </Text>
        </Box>
      )}
    </>
  );
}

function isFinal(item: ChatItem): boolean {
  if (item.kind === 'assistant') return item.done;
  if (item.kind === 'tool') return item.status !== 'running';
  return true;
}

function Header({ modelLabel, scripted, notes }: { modelLabel: string; scripted: boolean; notes: string[] }) {
  return (
    <Box flexDirection="column" marginBottom={1}>
      <Text bold>conch demo agent</Text>
      <Text>
        model:{' '}
        <Text color={scripted ? 'yellow' : 'green'} bold={scripted}>
          {modelLabel}
        </Text>
      </Text>
      {notes.map((note) => (
        <Text key={note} dimColor>
          {note}
        </Text>
      ))}
    </Box>
  );
}

const STATUS: Record<string, { mark: string; color: string }> = {
  ok: { mark: '✓', color: 'green' },
  failed: { mark: '✗', color: 'red' },
  denied: { mark: '⊘', color: 'red' },
  error: { mark: '!', color: 'red' },
  aborted: { mark: '■', color: 'yellow' },
};

function Item({
  item,
  now,
  approval,
  width,
}: {
  item: ChatItem;
  now: number;
  approval: PendingApproval | undefined;
  width: number;
}) {
  switch (item.kind) {
    case 'user':
      return (
        <Box marginTop={1}>
          <Text color="cyan" bold>
            {'› '}
            {item.text}
          </Text>
        </Box>
      );
    case 'assistant':
      return <Text>{item.text}</Text>;
    case 'command':
      return (
        <Text color="magenta" bold>
          {item.text}
        </Text>
      );
    case 'info':
      return <Text dimColor>{item.text}</Text>;
    case 'error':
      return <Text color="red">{item.text}</Text>;
    case 'tool': {
      const elapsed = formatDuration((item.endedAt ?? now) - item.startedAt);
      const running = item.status === 'running';
      const waiting = running && approval?.toolCallId === item.callId;
      const status = STATUS[item.status];
      return (
        <Box flexDirection="column" marginLeft={2}>
          <Text>
            {running ? (
              <Text color="cyan">{SPINNER[Math.floor(now / 100) % SPINNER.length]}</Text>
            ) : (
              <Text color={status?.color}>{status?.mark}</Text>
            )}{' '}
            <Text bold>{item.name}</Text>{' '}
            {truncate(item.summary, Math.max(20, width - item.name.length - 20))}{' '}
            <Text dimColor>
              {waiting
                ? 'waiting for your approval'
                : running
                  ? `running ${elapsed}`
                  : `${item.status} · ${elapsed}`}
            </Text>
          </Text>
          {item.detail ? (
            <Box marginLeft={2}>
              <Text dimColor={item.status === 'ok'} color={item.status === 'ok' ? undefined : status?.color}>
                {item.detail}
              </Text>
            </Box>
          ) : null}
        </Box>
      );
    }
  }
}

function ProcessPanel({ rows, now, width }: { rows: ProcessRow[]; now: number; width: number }) {
  const running = rows.filter((r) => r.running).length;
  return (
    <Box flexDirection="column" borderStyle="round" borderColor="gray" paddingX={1} marginTop={1}>
      <Text bold>
        Processes <Text dimColor>({running} running)</Text>
      </Text>
      {rows.length === 0 ? <Text dimColor>nothing running</Text> : null}
      {rows.slice(0, 6).map((r) => (
        <Box key={`${r.kind}:${r.id}`} flexDirection="column">
          <Text>
            <Text color={r.running ? 'green' : 'gray'}>{r.running ? '◉' : '○'}</Text>{' '}
            <Text bold>[{r.id}]</Text> {truncate(r.command, Math.max(20, width - 60))}{' '}
            <Text dimColor>
              {r.kind} · pid {r.pid ?? '-'} · {r.state}
              {r.startedAt !== undefined ? ` · ${formatDuration((r.endedAt ?? now) - r.startedAt)}` : ''}
            </Text>
          </Text>
          {r.lastLine ? (
            <Text dimColor>{`   › ${truncate(r.lastLine, Math.max(20, width - 12))}`}</Text>
          ) : null}
        </Box>
      ))}
      {rows.length > 6 ? <Text dimColor>… {rows.length - 6} more (!ps)</Text> : null}
    </Box>
  );
}

function ApprovalPrompt({ approval }: { approval: PendingApproval }) {
  const { request } = approval;
  return (
    <Box flexDirection="column" borderStyle="round" borderColor="yellow" paddingX={1}>
      <Text color="yellow" bold>
        conch asks: allow {request.tool} to run this?
      </Text>
      <Text bold>{request.display}</Text>
      <Text dimColor>{request.reason}</Text>
      {request.escalation && request.escalation.reaches.length > 0 ? (
        <Box flexDirection="column">
          <Text color="yellow">outside the sandbox it will reach:</Text>
          {request.escalation.reaches.map((line) => (
            <Text key={line}> - {line}</Text>
          ))}
        </Box>
      ) : null}
      {request.suggestedRule ? <Text dimColor>always adds the rule: {request.suggestedRule}</Text> : null}
      <Text>
        <Text color="green" bold>
          [y]
        </Text>
        es once ·{' '}
        <Text color="red" bold>
          [n]
        </Text>
        o ·{' '}
        <Text color="cyan" bold>
          [a]
        </Text>
        lways
      </Text>
    </Box>
  );
}

function Pager({
  title,
  lines,
  offset,
  height,
}: {
  title: string;
  lines: string[];
  offset: number;
  height: number;
}) {
  const shown = lines.slice(offset, offset + height);
  const end = Math.min(lines.length, offset + height);
  return (
    <Box flexDirection="column" borderStyle="single" paddingX={1}>
      <Text bold>
        {title}{' '}
        <Text dimColor>
          lines {lines.length === 0 ? 0 : offset + 1}–{end} of {lines.length}
        </Text>
      </Text>
      {shown.map((line, i) => (
        <Text key={offset + i} wrap="truncate-end">
          {line || ' '}
        </Text>
      ))}
      <Text dimColor>space/b page · j/k line · g/G top/end · q close</Text>
    </Box>
  );
}

/** Renders the app full-screen; Ctrl+C is handled by the app (cancel, then exit). */
export function startTui(props: AppProps): { waitUntilExit: () => Promise<unknown>; unmount: () => void } {
  const instance = render(<App {...props} />, { exitOnCtrlC: false });
  return { waitUntilExit: () => instance.waitUntilExit(), unmount: () => instance.unmount() };
}
