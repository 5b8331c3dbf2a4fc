// A small, realistic workspace for judging the agent-command corpus (commands.jsonl) against: a git
// repository holding a Python package (src/ layout, tests, setup.py and pyproject.toml), a
// package.json, a Makefile and a README, so relative paths in the commands (src/…, tests/…,
// setup.py, package.json, Makefile, README.md) resolve to something plausible.
// Plain node: only node built-ins and `git` on PATH.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const FILES = {
  'README.md': `# acme

A small Python library with a JavaScript front end, used as a fixture.

\`\`\`sh
pip install -e .
pytest tests/
npm test
\`\`\`
`,
  '.gitignore': `__pycache__/
*.pyc
*.egg-info/
.venv/
node_modules/
dist/
build/
.pytest_cache/
`,
  'setup.py': `from setuptools import find_packages, setup

setup(
    name="acme",
    version="0.1.0",
    package_dir={"": "src"},
    packages=find_packages("src"),
    install_requires=["requests>=2.31"],
    extras_require={"dev": ["pytest>=7", "ruff"]},
)
`,
  'pyproject.toml': `[build-system]
requires = ["setuptools>=61", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "acme"
version = "0.1.0"
requires-python = ">=3.9"
dependencies = ["requests>=2.31"]

[project.optional-dependencies]
dev = ["pytest>=7", "ruff"]

[tool.pytest.ini_options]
testpaths = ["tests"]
`,
  'requirements.txt': `requests>=2.31
pytest>=7
`,
  'setup.cfg': `[metadata]
name = acme

[flake8]
max-line-length = 100
`,
  'src/acme/__init__.py': `"""acme: a tiny library used as a fixture."""
from .core import Config, parse_config, process

__all__ = ["Config", "parse_config", "process"]
__version__ = "0.1.0"
`,
  'src/acme/core.py': `from dataclasses import dataclass, field
from typing import Dict, List


@dataclass
class Config:
    name: str
    options: Dict[str, str] = field(default_factory=dict)


def parse_config(text: str) -> Config:
    """Parse 'key=value' lines; the first line is the name."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise ValueError("empty config")
    options = {}
    for line in lines[1:]:
        key, _, value = line.partition("=")
        options[key.strip()] = value.strip()
    return Config(lines[0], options)


def process(items: List[int]) -> List[int]:
    return sorted(set(items))
`,
  'src/acme/utils.py': `import json
from pathlib import Path


def load_json(path):
    return json.loads(Path(path).read_text())


def slugify(text: str) -> str:
    return "-".join(text.lower().split())
`,
  'src/acme/cli.py': `import argparse

from .core import process


def main(argv=None):
    parser = argparse.ArgumentParser(prog="acme")
    parser.add_argument("numbers", nargs="*", type=int)
    args = parser.parse_args(argv)
    print(process(args.numbers))


if __name__ == "__main__":
    main()
`,
  'tests/__init__.py': '',
  'tests/conftest.py': `import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
`,
  'tests/test_core.py': `import pytest

from acme.core import parse_config, process


def test_parse_config():
    config = parse_config("demo\\nmode = fast\\n")
    assert config.name == "demo"
    assert config.options == {"mode": "fast"}


def test_empty_config():
    with pytest.raises(ValueError):
        parse_config("")


def test_process():
    assert process([3, 1, 3]) == [1, 3]
`,
  'tests/test_utils.py': `from acme.utils import slugify


def test_slugify():
    assert slugify("Hello World") == "hello-world"
`,
  'docs/index.md': `# acme documentation

See README.md.
`,
  'scripts/release.sh': `#!/bin/sh
set -e
python -m build
`,
  'package.json': `${JSON.stringify(
    {
      name: 'acme-web',
      version: '0.1.0',
      private: true,
      type: 'module',
      scripts: {
        build: 'tsc -p .',
        test: 'node --test',
        lint: 'eslint .',
        dev: 'node web/server.js',
      },
      devDependencies: { typescript: '^5.6.0', eslint: '^9.0.0' },
    },
    null,
    2,
  )}\n`,
  'tsconfig.json': `${JSON.stringify({ compilerOptions: { outDir: 'dist', strict: true, module: 'nodenext' }, include: ['web'] }, null, 2)}\n`,
  'web/server.js': `import { createServer } from 'node:http';

createServer((req, res) => res.end('ok')).listen(process.env.PORT ?? 3000);
`,
  'web/app.ts': `export function greet(name: string): string {
  return \`Hello, \${name}\`;
}
`,
  Makefile: `.PHONY: install test lint build clean

install:
\tpip install -e .[dev]

test:
\tpytest tests/

lint:
\truff check src tests

build:
\tpython -m build

clean:
\trm -rf build dist *.egg-info
`,
};

/** Runs git in `dir` with a config that cannot reach the user's own (no system or global files). */
function git(dir, args, home) {
  execFileSync('git', args, {
    cwd: dir,
    stdio: 'ignore',
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home ?? dir,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_AUTHOR_NAME: 'Fixture',
      GIT_AUTHOR_EMAIL: 'fixture@example.invalid',
      GIT_COMMITTER_NAME: 'Fixture',
      GIT_COMMITTER_EMAIL: 'fixture@example.invalid',
      GIT_AUTHOR_DATE: '2025-01-01T00:00:00Z',
      GIT_COMMITTER_DATE: '2025-01-01T00:00:00Z',
    },
  });
}

/**
 * Creates the fixture workspace in `dir` (created if missing) and returns `dir`: the files above,
 * committed on `main` in a fresh git repository with a plain `.git/config`.
 * `options.home` is the HOME git runs with (default: `dir`, so the user's ~/.gitconfig is never read).
 */
export function makeFixtureWorkspace(dir, options = {}) {
  mkdirSync(dir, { recursive: true });
  for (const [path, text] of Object.entries(FILES)) {
    const file = join(dir, path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text, path.endsWith('.sh') ? { mode: 0o755 } : {});
  }
  git(dir, ['init', '-q', '-b', 'main'], options.home);
  git(dir, ['add', '-A'], options.home);
  git(dir, ['commit', '-q', '-m', 'Initial commit'], options.home);
  return dir;
}
