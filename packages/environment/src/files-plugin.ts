// The `files` plugin is @conch/files'; this module keeps it this package's `conch.plugin` entry, so
// discovery from a project that installed only @conch/environment still finds it (the same
// plugin object as @conch/files' own entry: found twice, known once).
export { filesPlugin, filesPlugin as default } from '@conch/files';
