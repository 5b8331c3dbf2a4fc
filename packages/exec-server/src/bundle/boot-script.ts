/**
 * The few lines that run first in the target, as `node -e <BOOT_SCRIPT> <hash> [cacheRoot]`, over
 * the same byte stream the server then uses. If the bundle with that content hash is installed
 * (`<cacheRoot>/<hash>/.complete`), it imports the server from there and hands it the stream. If
 * not, it says `need-bundle` on stdout, reads the bundle from stdin (a JSON header line naming each
 * file with its size and sha256, then the bytes), checks every digest and the bundle hash,
 * installs it atomically (a temp dir renamed into place: two hosts deploying at once both end
 * with one complete copy), says `installed`, and starts it. So a first use costs one connection,
 * and every later one finds the copy.
 *
 * cacheRoot defaults to `$XDG_CACHE_HOME/conch/exec-server`, else `~/.cache/conch/exec-server`, else
 * (no writable home, as for a container's nobody user) `<tmpdir>/conch-exec-server-<uid>`.
 *
 * With `--attach <socket>` after those, it starts the bundle's attach relay instead (a client
 * re-attaching to a detached server of that bundle); a bundle that is not there any more means the
 * session is gone (`SESSION_GONE`).
 *
 * Plain CommonJS for `node -e`, node >= 20, no dependencies. Its lines on stdout are JSON objects
 * with a `conchBoot` field (the client tells them from rc-file noise and from the server's hello).
 */
export const BOOT_SCRIPT = String.raw`'use strict';
const fs = require('fs'), path = require('path'), os = require('os'), crypto = require('crypto'), url = require('url');
const argv = process.argv.slice(1), attachAt = argv.indexOf('--attach');
const hash = argv[0] || '', rootArg = (attachAt === 1 ? '' : argv[1]) || '', attachTo = attachAt > 0 ? argv[attachAt + 1] || '' : '';
const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const fail = (code, message) => { say({ conchBoot: 'error', code, message }); process.exit(3); };
if (!/^[0-9a-f]{16,64}$/.test(hash)) fail('BAD_ARGUMENTS', 'expected a bundle hash as the first argument; given ' + JSON.stringify(hash));
if (Number(process.versions.node.split('.')[0]) < 20) fail('NODE_TOO_OLD', 'conch-exec-server needs node >= 20; this target runs node ' + process.version);
const sha256 = (b) => crypto.createHash('sha256').update(b).digest('hex');
const bundleHash = (files) => sha256(files.map((f) => f.path + '\0' + f.sha256 + '\n').join('')).slice(0, 24);
const writable = (dir) => { try { fs.mkdirSync(dir, { recursive: true, mode: 0o700 }); fs.accessSync(dir, fs.constants.W_OK); return true; } catch { return false; } };
function cacheRoot() {
  if (rootArg) return rootArg;
  let home = '';
  try { home = os.homedir(); } catch {}
  const base = process.env.XDG_CACHE_HOME || (home ? path.join(home, '.cache') : '');
  const primary = base ? path.join(base, 'conch', 'exec-server') : '';
  if (primary && (fs.existsSync(path.join(primary, hash, '.complete')) || writable(primary))) return primary;
  return path.join(os.tmpdir(), 'conch-exec-server-' + (process.getuid ? process.getuid() : 'user'));
}
const root = cacheRoot();
const dir = path.join(root, hash);
const complete = () => fs.existsSync(path.join(dir, '.complete'));
function start() {
  try { const now = new Date(); fs.utimesSync(path.join(dir, '.complete'), now, now); } catch {}
  import(url.pathToFileURL(path.join(dir, 'exec-server.js')).href).then(
    (m) => m.main({ bundle: hash, dir }),
    (e) => fail('BUNDLE_LOAD_FAILED', String((e && e.stack) || e)),
  );
}
function install(header, bytes) {
  let at = 0;
  for (const f of header.files) {
    if (typeof f.path !== 'string' || f.path.startsWith('/') || f.path.split('/').includes('..')) fail('BUNDLE_CORRUPT', 'bad file path ' + JSON.stringify(f.path));
    if (sha256(bytes.subarray(at, at + f.size)) !== f.sha256) fail('BUNDLE_CORRUPT', f.path + ': its bytes do not match its sha256');
    at += f.size;
  }
  if (bundleHash(header.files) !== hash) fail('BUNDLE_CORRUPT', 'the files sent do not make bundle ' + hash);
  if (!writable(root)) fail('INSTALL_FAILED', 'cannot write the cache directory ' + root);
  const tmp = fs.mkdtempSync(path.join(root, '.tmp-' + hash + '-'));
  at = 0;
  for (const f of header.files) {
    const file = path.join(tmp, f.path);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, bytes.subarray(at, at + f.size), { mode: f.mode || 0o644 });
    at += f.size;
  }
  fs.writeFileSync(path.join(tmp, '.complete'), hash + '\n');
  try {
    fs.renameSync(tmp, dir);
  } catch (e) {
    fs.rmSync(tmp, { recursive: true, force: true });
    if (!complete()) fail('INSTALL_FAILED', 'could not install into ' + dir + ': ' + e.message);
  }
}
function receive() {
  say({ conchBoot: 'need-bundle', hash, dir });
  let buf = Buffer.alloc(0);
  let header;
  const onEnd = () => process.exit(0);
  const onData = (chunk) => {
    buf = Buffer.concat([buf, chunk]);
    if (!header) {
      const nl = buf.indexOf(10);
      if (nl < 0) return;
      try { header = JSON.parse(buf.subarray(0, nl).toString('utf8')); } catch { fail('BUNDLE_CORRUPT', 'unreadable bundle header'); }
      buf = buf.subarray(nl + 1);
    }
    const total = header.files.reduce((n, f) => n + f.size, 0);
    if (buf.length < total) return;
    process.stdin.off('data', onData);
    process.stdin.off('end', onEnd);
    process.stdin.pause();
    install(header, buf.subarray(0, total));
    if (buf.length > total) process.stdin.unshift(buf.subarray(total));
    say({ conchBoot: 'installed', hash, dir });
    start();
  };
  process.stdin.on('data', onData);
  process.stdin.on('end', onEnd);
}
function relay() {
  import(url.pathToFileURL(path.join(dir, 'attach-relay.js')).href).then(
    (m) => m.attach({ socket: attachTo }),
    (e) => fail('BUNDLE_LOAD_FAILED', String((e && e.stack) || e)),
  );
}
if (attachTo) { if (complete()) relay(); else fail('SESSION_GONE', 'the server bundle ' + hash + ' is not in ' + root + ' any more'); }
else if (complete()) start(); else receive();
`;
