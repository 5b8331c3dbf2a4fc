import { posix } from 'node:path';
import { ConchError, type PluginScope, safeStatSync } from '@conch/core';
import { PROCESS_LAYER, PROCESS_MANAGER, type ProcessLayer, type ProcessTarget } from '@conch/process';
import { defaultTrashDir, safeRmFunction } from '@conch/trash';
import type { CliPlan } from './plan.js';

/**
 * The process layer a call runs through: the one provided under PROCESS_LAYER (the `executor`
 * plugin's: a remote target, or every command wrapped in bubblewrap), else the given or the
 * registry's ProcessManager. Resolved per call, so exposure order does not matter. A provided
 * layer that was disposed is still returned (its spawn refuses): a command judged for a target
 * never falls back to this machine.
 */
export function processLayerFor(
  ctx: Pick<PluginScope, 'resolveOptional'>,
  given?: ProcessLayer,
): ProcessLayer | undefined {
  return ctx.resolveOptional(PROCESS_LAYER) ?? given ?? ctx.resolveOptional(PROCESS_MANAGER);
}

/** A target that could not be reached while the call was planned: why, with a stable code. */
export interface Unreachable {
  message: string;
  code: string;
}

const blindPlans = new WeakMap<CliPlan, Unreachable>();

/** Where a remote layer runs things, or why it cannot say (the connection failed). */
export async function reachTarget(
  layer: ProcessLayer | undefined,
): Promise<ProcessTarget | Unreachable | undefined> {
  if (!layer?.remote) return undefined;
  try {
    return await layer.remote();
  } catch (error) {
    return {
      message: (error as Error).message,
      code: ConchError.isInstance(error) ? error.code : 'TRANSPORT_LOST',
    };
  }
}

export function isUnreachable(value: ProcessTarget | Unreachable | undefined): value is Unreachable {
  return value !== undefined && 'code' in value;
}

/** Marks a plan made without its target (planned against '/'): it must not run. */
export function markBlind(plan: CliPlan, why: Unreachable): void {
  blindPlans.set(plan, why);
}

export function blindReason(plan: CliPlan): Unreachable | undefined {
  return blindPlans.get(plan);
}

const plannedTargets = new WeakMap<CliPlan, ProcessTarget>();

/** Marks a plan made for a remote target: the gate judges it against the target's home and workspace. */
export function markTarget(plan: CliPlan, where: ProcessTarget): void {
  plannedTargets.set(plan, where);
}

/** The remote target a plan was made for, if any. */
export function plannedTarget(plan: CliPlan): ProcessTarget | undefined {
  return plannedTargets.get(plan);
}

/** The base cwd in a target: the config's cwd against the target's workspace. */
export function remoteBaseCwd(configCwd: string | undefined, where: ProcessTarget): string {
  return posix.resolve(where.cwd, configCwd ?? '.');
}

/**
 * Safe rm in a target: the trash's rm function is defined at the top of the script (no file on
 * this machine can be sourced there), moving files into the target user's trash for the workspace
 * (`$XDG_DATA_HOME/conch/trash/<project>` there, as the terminal in the target uses).
 */
export function remoteSafeRm(dialect: CliPlan['dialect'], baseCwd: string, where: ProcessTarget): string {
  const trashDir = defaultTrashDir(baseCwd, { HOME: where.home ?? baseCwd });
  return safeRmFunction(dialect === 'zsh' ? 'zsh' : dialect === 'bash' ? 'bash' : 'sh', trashDir);
}

/**
 * What a command's cwd is where it runs: this machine's file system, or the target's (asked over
 * its connection). A connection that fails is reported as such.
 */
export async function directoryState(
  layer: ProcessLayer,
  path: string,
): Promise<'directory' | 'not-directory' | 'missing' | Unreachable> {
  if (layer.remote && layer.directoryState) {
    try {
      return await layer.directoryState(path);
    } catch (error) {
      return {
        message: (error as Error).message,
        code: ConchError.isInstance(error) ? error.code : 'TRANSPORT_LOST',
      };
    }
  }
  // Synchronous on purpose: one stat of a local directory takes about 2 µs; fs.promises.stat hands
  // it to the thread pool and measured about 0.1 ms more host CPU per cli call (cli `true`, 2 cores).
  try {
    return safeStatSync(path).isDirectory() ? 'directory' : 'not-directory';
  } catch {
    return 'missing';
  }
}

/** Whether a process result is a remote run whose connection was lost (the process was killed there). */
export function transportLost(result: object): boolean {
  return (result as { errorCode?: string }).errorCode === 'TRANSPORT_LOST';
}

/** Whether a process result is a remote run whose exec server session expired (killed there past its grace period). */
export function sessionExpired(result: object): boolean {
  return (result as { errorCode?: string }).errorCode === 'SESSION_EXPIRED';
}
