import { isMainThread } from 'node:worker_threads';
import { hostAddon } from './native-spawn.js';

/**
 * The host's environment as a plain object, for one spawn.
 *
 * Reading process.env is slow for what it is: every name is a getenv() that scans the whole
 * environment from its start, and a new string; a copy of the whole costs O(n^2) (measured here:
 * ~70 us for 35 variables, ~430 us for 135, a CI runner's size), paid on every spawn. So the last
 * copy is kept and handed out again (as a new object) while the addon's `envGeneration()` says
 * `environ` has not changed since. Where that cannot be known, every call reads process.env:
 * - no addon (a platform without a prebuild, or CONCH_NATIVE_SPAWN=0);
 * - not the main thread (a worker's process.env is its own copy, not `environ`);
 * - process.env is not node's own object (a test runner's copy, as jest makes; `process.env = {}`):
 *   writes to it never reach `environ`. Node's object answers every symbol key itself (undefined)
 *   where an ordinary object reads its prototype; that is the test, run once per object.
 */
let cached: { env: Record<string, string | undefined>; generation: number; of: object } | undefined;
let judged: { of: object; genuine: boolean } | undefined;

/** Whether `env` is node's own process.env (reads and writes are the process's environment). */
export function isNodeEnvironment(env: object): boolean {
  if (judged?.of === env) return judged.genuine;
  let genuine = false;
  const proto: object | null = Object.getPrototypeOf(env);
  if (proto !== null) {
    const probe = Symbol('conch.env-probe');
    // Reflect.defineProperty: false (not a throw) where the prototype is frozen; then no cache.
    if (Reflect.defineProperty(proto, probe, { value: true, configurable: true })) {
      try {
        genuine = (env as Record<symbol, unknown>)[probe] === undefined;
      } finally {
        Reflect.deleteProperty(proto, probe);
      }
    }
  }
  judged = { of: env, genuine };
  return genuine;
}

/**
 * A copy of `env` that V8 keeps in fast mode (a hidden class, not a hash table), for the copies
 * kept between spawns. Why: an object built key by key from process.env (a computed key per
 * variable, 35 and more) becomes a dictionary, and so does every Object.assign copy of it: each
 * later pass over a spawn's env (the copy, the credential filter, the caller's variables, the
 * command-line size check, the difference sent to the supervisor) then costs about three times as
 * much (measured: a copy of 35 variables 21 µs, 5 µs from a fast object). JSON.parse builds
 * fast objects; a hidden variable (undefined, which JSON drops) travels as null and is set back.
 */
function fastCopy(env: Record<string, string | undefined>): Record<string, string | undefined> {
  const hidden: string[] = [];
  const plain: Record<string, string | null> = {};
  for (const key in env) {
    const value = env[key];
    if (value === undefined) hidden.push(key);
    plain[key] = value ?? null;
  }
  const copy = JSON.parse(JSON.stringify(plain)) as Record<string, string | undefined>;
  for (const key of hidden) copy[key] = undefined;
  return copy;
}

/** A name/value test: true hides the variable (a sandbox profile's credential filter). */
export type EnvHider = (name: string, value?: string) => boolean;

/** The host's environment with each hider's variables set to undefined, by hider (see below). */
const filteredCache = new WeakMap<
  EnvHider,
  { env: Record<string, string | undefined>; generation: number; of: object }
>();

/**
 * A fresh copy of the host's environment (the caller may change it). With `hide`, every variable
 * it hides is there as undefined. A hider is a pure function of the name and value (a profile's
 * compiled filter), so its answers over an unchanged environment are kept with the copy: a
 * sandboxed spawn tests each of the host's variables (a Map lookup and a `name=value` string each)
 * only when `environ` changed.
 */
export function hostEnvironment(hide?: EnvHider): Record<string, string | undefined> {
  const source = process.env;
  const generation = isMainThread && isNodeEnvironment(source) ? hostAddon()?.envGeneration?.() : undefined;
  if (hide && generation !== undefined) {
    const known = filteredCache.get(hide);
    if (known?.generation === generation && known.of === source) return Object.assign({}, known.env);
  }
  let env: Record<string, string | undefined>;
  if (generation !== undefined && cached?.generation === generation && cached.of === source) {
    env = Object.assign({}, cached.env);
  } else {
    env = {};
    for (const key in source) env[key] = source[key];
    if (generation !== undefined) cached = { env: fastCopy(env), generation, of: source };
  }
  if (!hide) return env;
  for (const key in env) if (env[key] !== undefined && hide(key, env[key])) env[key] = undefined;
  if (generation !== undefined) filteredCache.set(hide, { env: fastCopy(env), generation, of: source });
  return env;
}
