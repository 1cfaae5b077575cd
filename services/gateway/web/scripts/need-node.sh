#!/bin/sh
# Run by the Taskfile before every web client step: exits 0 when Node.js
# >= 20.19 and npm are installed. Otherwise it exits 1 with an error under
# CI=true, and 2 with a warning elsewhere (the step is then skipped).
if command -v npm >/dev/null 2>&1 &&
  node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' 2>/dev/null; then
  exit 0
fi
found="node $(node --version 2>/dev/null || echo none), npm $(npm --version 2>/dev/null || echo none)"
if [ "$CI" = true ]; then
  echo "error: the web client (services/gateway/web) needs Node.js >= 20.19 and npm; found $found" >&2
  exit 1
fi
echo "warning: the web client (services/gateway/web) needs Node.js >= 20.19 and npm; found $found: its step is skipped" >&2
exit 2
