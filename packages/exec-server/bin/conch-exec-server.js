#!/usr/bin/env node
// The conch-exec-server bin: a committed file, so `pnpm install` links it before anything is built
// (a bin pointing into dist/ made every fresh install warn "Failed to create bin"). It runs the
// built server.
import '../dist/bin/conch-exec-server.js';
