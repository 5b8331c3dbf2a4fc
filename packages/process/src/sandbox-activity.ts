import {
  changesHistory,
  historyPlants,
  inspectPlants,
  workTreeOf,
  type GuardEvent,
  type GuardOp,
  type Plant,
} from '@conch/sandbox';

/** A call the sandbox's guard refused (the kernel-side wall of issue 32: see @conch/sandbox guard). */
export interface GuardRefusal {
  op: GuardOp;
  /** The path as the guard resolved it (real directory, then the name). */
  path: string;
  /** EROFS for a protected path or name, EACCES for the supervisor's private /proc entries, … */
  errno: number;
}

/** What the guard saw a spawn (and everything it started) do: refusals, and plants left behind. */
export interface SandboxActivity {
  refusals: GuardRefusal[];
  plants: Plant[];
}

/** A plant as `status()` lists it until the human clears it. */
export interface ReportedPlant extends Plant {
  /** The spawn (its cookie) whose command wrote it, when known. */
  cookie?: string;
}

/** Refusals kept per spawn (a program that loops on a refused path is one line per path anyway). */
const MAX_REFUSALS = 200;
/** Watched paths kept per spawn (config files, refs: a handful per call). */
const MAX_WRITTEN = 2_000;

interface Entry {
  refusals: GuardRefusal[];
  written: Set<string>;
}

/**
 * The guard's events sorted by the spawn they came from (its cookie, which every descendant
 * inherits), turned into a result's refusals and plants when the spawn ends, and the plants kept
 * for `status()` until cleared. Writes that come after their spawn's result (a process it left
 * running) or from no known spawn are analysed when the status is read.
 */
export class SandboxActivityLog {
  private readonly entries = new Map<string, Entry>();
  private readonly known = new Map<string, ReportedPlant>();
  private readonly onPlant: ((plant: ReportedPlant) => void) | undefined;

  constructor(options: { onPlant?: (plant: ReportedPlant) => void } = {}) {
    this.onPlant = options.onPlant;
  }

  record(event: GuardEvent): void {
    if (event.kind !== 'refused' && event.kind !== 'written') return;
    const cookie = event.cookie ?? '';
    let entry = this.entries.get(cookie);
    if (!entry) {
      entry = { refusals: [], written: new Set() };
      this.entries.set(cookie, entry);
    }
    if (event.kind === 'refused') {
      if (entry.refusals.length < MAX_REFUSALS)
        entry.refusals.push({ op: event.op, path: event.path, errno: event.errno });
    } else if (entry.written.size < MAX_WRITTEN) entry.written.add(event.path);
  }

  /** A spawn's activity (removed from the log), its plants analysed now. */
  async take(cookie: string): Promise<SandboxActivity | undefined> {
    // The guard sent each event before answering the call it is about, so by now it is in this
    // process's socket buffer; one turn of the event loop's poll phase reads it.
    await new Promise<void>((resolve) => setImmediate(resolve));
    const entry = this.entries.get(cookie);
    if (!entry) return undefined;
    this.entries.delete(cookie);
    const plants = await analyse(entry.written);
    for (const plant of plants) this.remember({ ...plant, cookie });
    return { refusals: entry.refusals, plants };
  }

  /** Every plant found and not cleared, the pending writes analysed first. */
  async plants(): Promise<ReportedPlant[]> {
    for (const [cookie, entry] of this.entries) {
      if (entry.written.size === 0) continue;
      for (const plant of await analyse(entry.written))
        this.remember({ ...plant, ...(cookie ? { cookie } : {}) });
    }
    return [...this.known.values()];
  }

  /** Forgets plants (all, or those at these paths): the human has looked at them. Returns how many. */
  clear(paths?: readonly string[]): number {
    let cleared = 0;
    for (const [key, plant] of this.known) {
      if (paths && !paths.includes(plant.path)) continue;
      this.known.delete(key);
      cleared++;
    }
    // What was analysed is not analysed again (a cleared plant stays cleared until written again).
    for (const entry of this.entries.values()) {
      for (const path of [...entry.written]) if (!paths || paths.includes(path)) entry.written.delete(path);
    }
    return cleared;
  }

  private remember(plant: ReportedPlant): void {
    const key = `${plant.kind}\0${plant.path}\0${plant.detail}`;
    if (this.known.has(key)) return;
    this.known.set(key, plant);
    this.onPlant?.(plant);
  }
}

/** The plants a set of written paths carries: the files themselves, and history for changed repositories. */
async function analyse(written: Iterable<string>): Promise<Plant[]> {
  const paths = [...written];
  const plants = inspectPlants(paths);
  const repos = new Map<string, string[]>();
  for (const path of paths) {
    if (!changesHistory(path)) continue;
    const tree = workTreeOf(path);
    if (!tree) continue;
    const list = repos.get(tree) ?? [];
    list.push(path);
    repos.set(tree, list);
  }
  for (const [tree, changed] of repos) plants.push(...(await historyPlants(tree, changed)));
  return plants;
}
