import { realpathSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { safeStatSync } from '@conch/core';

/** Whether a container engine answers on this host, and where. */
export interface EngineAvailability {
  available: boolean;
  /** The engine's unix socket (when available). */
  socket?: string;
  /** The engine's name and version as it reports them (`Podman Engine 4.3.1`, `Docker Engine 27.1`). */
  engine?: string;
  /** Why none is available: the sockets looked at and what each did. */
  reason?: string;
}

/**
 * The unix sockets a Docker API engine listens on here, in the order they are tried: `DOCKER_HOST`
 * when it is a `unix://` address, Docker's, rootless podman's (`$XDG_RUNTIME_DIR/podman/podman.sock`,
 * `/run/user/<uid>/podman/podman.sock`), rootful podman's.
 */
export function engineSocketCandidates(env: NodeJS.ProcessEnv = process.env): string[] {
  const candidates: string[] = [];
  const host = env.DOCKER_HOST;
  if (host?.startsWith('unix://')) candidates.push(host.slice('unix://'.length));
  candidates.push('/var/run/docker.sock', '/run/docker.sock');
  if (env.XDG_RUNTIME_DIR) candidates.push(join(env.XDG_RUNTIME_DIR, 'podman', 'podman.sock'));
  const uid = process.getuid?.();
  if (uid !== undefined) candidates.push(`/run/user/${uid}/podman/podman.sock`);
  candidates.push('/run/podman/podman.sock', '/var/run/podman/podman.sock');
  return [...new Set(candidates)];
}

/** Real paths of every engine socket that exists here (never to be mounted into a container). */
export function existingEngineSockets(
  extra: readonly string[] = [],
  env: NodeJS.ProcessEnv = process.env,
): string[] {
  const found = new Set<string>();
  for (const path of [...extra, ...engineSocketCandidates(env)]) {
    try {
      found.add(realpathSync(path));
    } catch {
      // not there
    }
  }
  return [...found];
}

/**
 * GET /_ping on a unix socket (not /version: podman's runs conmon and the runtime, seconds): the
 * engine's name from its Server header, or why it did not answer.
 */
export function pingEngine(
  socket: string,
  timeoutMs = 10_000,
): Promise<{ ok: boolean; engine?: string; error?: string }> {
  return new Promise((resolve) => {
    const req = request(
      { socketPath: socket, path: '/_ping', method: 'GET', agent: false, timeout: timeoutMs },
      (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode !== 200)
            return resolve({ ok: false, error: `it answered ${res.statusCode} to /_ping` });
          const server = res.headers.server;
          const api = res.headers['api-version'];
          resolve({
            ok: true,
            engine: `${typeof server === 'string' ? server : 'engine'}${typeof api === 'string' ? ` (API ${api})` : ''}`,
          });
        });
        res.on('error', (error) => resolve({ ok: false, error: error.message }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)));
    req.on('error', (error: NodeJS.ErrnoException) =>
      resolve({ ok: false, error: error.code ?? error.message }),
    );
    req.end();
  });
}

/**
 * Finds the engine to forward to: the socket given, or the first candidate that answers. `exclude`
 * (the proxy's own socket) is never taken, so a `DOCKER_HOST` pointing at a proxy does not loop.
 */
export async function engineAvailable(
  options: { engineSocket?: string; env?: NodeJS.ProcessEnv; exclude?: readonly string[] } = {},
): Promise<EngineAvailability> {
  const candidates = options.engineSocket ? [options.engineSocket] : engineSocketCandidates(options.env);
  const excluded = new Set(
    (options.exclude ?? []).flatMap((p) => {
      try {
        return [realpathSync(p)];
      } catch {
        return [p];
      }
    }),
  );
  const tried: string[] = [];
  for (const socket of candidates) {
    let real: string;
    try {
      real = realpathSync(socket);
      if (!safeStatSync(real).isSocket()) {
        tried.push(`${socket}: not a socket`);
        continue;
      }
    } catch {
      tried.push(`${socket}: absent`);
      continue;
    }
    if (excluded.has(real)) {
      tried.push(`${socket}: the proxy's own socket`);
      continue;
    }
    const ping = await pingEngine(socket);
    if (ping.ok) return { available: true, socket, ...(ping.engine ? { engine: ping.engine } : {}) };
    tried.push(`${socket}: ${ping.error}`);
  }
  return {
    available: false,
    reason: `no container engine answers on this host (${tried.join('; ')}); start one (e.g. \`podman system service\` or dockerd) to use docker inside the sandbox`,
  };
}

/**
 * Where the sandbox sees the proxy's socket: Docker's default path, so `docker`, `docker compose`,
 * docker-compose and the client libraries find it without configuration (on most systems
 * /var/run is a symlink to /run: bind the proxy's socket at /run/docker.sock over a tmpfs /run).
 */
export const ENGINE_SOCKET_IN_SANDBOX = '/var/run/docker.sock';

/**
 * The environment a sandboxed command gets with the engine door open: DOCKER_HOST on the proxy's
 * socket as the sandbox sees it; the variables that would point a client elsewhere (a remote
 * engine, TLS material, a context) are emptied.
 */
export function engineSandboxEnv(socketInSandbox: string = ENGINE_SOCKET_IN_SANDBOX): Record<string, string> {
  return {
    DOCKER_HOST: `unix://${socketInSandbox}`,
    DOCKER_CONTEXT: 'default',
    DOCKER_TLS_VERIFY: '',
    DOCKER_CERT_PATH: '',
  };
}
