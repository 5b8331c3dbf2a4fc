import { ConchError } from '@conch/core';

/** The server in a target speaks another protocol version than this host (a server installed by hand, outdated). */
export class ProtocolVersionError extends ConchError {
  readonly target: string;
  readonly serverVersion: number | string;
  readonly clientVersion: number;

  constructor(target: string, serverVersion: number | string, clientVersion: number, serverPackage?: string) {
    super({
      code: 'EXEC_SERVER_PROTOCOL_MISMATCH',
      message:
        `exec server on ${target}: expected conch exec protocol version ${clientVersion} (this host's @conch/exec-server); ` +
        `the server speaks version ${String(serverVersion)}${serverPackage ? ` (@conch/exec-server ${serverPackage})` : ''}. ` +
        'Let conch deploy its own server (remove serverCommand), or install the matching version in the target',
    });
    this.name = 'ProtocolVersionError';
    this.target = target;
    this.serverVersion = serverVersion;
    this.clientVersion = clientVersion;
  }
}
