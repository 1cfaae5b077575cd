// Exits 0 when node_modules holds exactly the packages of package-lock.json
// (as npm recorded them in node_modules/.package-lock.json), 1 otherwise:
// `task deps` then runs npm ci. Optional packages for other platforms are
// allowed to be missing. An argument names another npm project's directory
// (deploy/vad); without one it is the web client's.
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

const dir = process.argv[2] ? pathToFileURL(resolve(process.argv[2]) + '/') : new URL('../', import.meta.url)
const read = (f) => JSON.parse(readFileSync(new URL(f, dir), 'utf8')).packages ?? {}
let have
try {
  have = read('node_modules/.package-lock.json')
} catch {
  process.exit(1)
}
const want = read('package-lock.json')
const stale = []
for (const [path, pkg] of Object.entries(want)) {
  if (path === '') continue
  const got = have[path]
  if (!got) {
    if (!pkg.optional && !pkg.peer) stale.push(`${path} missing`)
  } else if (got.version !== pkg.version) {
    stale.push(`${path} ${got.version}, want ${pkg.version}`)
  }
}
for (const path of Object.keys(have)) if (!(path in want)) stale.push(`${path} not in package-lock.json`)
if (stale.length) {
  console.error(`node_modules differs from package-lock.json: ${stale.slice(0, 5).join('; ')}${stale.length > 5 ? '; …' : ''}`)
  process.exit(1)
}
