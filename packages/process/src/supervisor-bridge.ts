// The network bridge a sandboxed supervisor runs (see @conch/sandbox bridge.ts): imported by its
// own small entry, so the supervisor loads nothing else of the sandbox package.
export { joinSockets, startBridge, startLoopbackForwards } from '@conch/sandbox/bridge';
