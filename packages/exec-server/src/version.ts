/** The @conch/exec-server version (kept in step with package.json by the build's bundle script check). */
export const VERSION = '0.0.0';
