// The web client's lint (npm run lint, in `task web-check`): TypeScript's
// recommended rules and React's rules of hooks, on every TypeScript file of
// the client (the app, its tests, the browser specs and benchmarks, the
// build scripts). Only what is listed here differs from the presets.
import reactHooks from 'eslint-plugin-react-hooks'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  // The build, the generated types (written by scripts/gen-*.mjs, checked
  // for staleness instead) and what the test runs leave behind.
  { ignores: ['dist/', 'node_modules/', 'test-results*/', 'bench-results/', 'screenshots/', 'src/**/*.gen.ts'] },
  // typescript-eslint's recommended set (not the type-checked one: tsc -b
  // already runs in the same check, and that set would double its time).
  ...tseslint.configs.recommended,
  {
    files: ['**/*.{ts,tsx}'],
    plugins: { 'react-hooks': reactHooks },
    rules: {
      // The rules of hooks (only at a component's or hook's top level, in
      // the same order on every render), as in the plugin's presets.
      'react-hooks/rules-of-hooks': 'error',
      // A hook's dependencies complete: an error, not the presets' warning,
      // so that the check fails on it (a stale closure over an old store,
      // id or query shows old data without any test noticing). A deliberate
      // exception says why beside its eslint-disable comment.
      'react-hooks/exhaustive-deps': 'error',
      // The presets' other react-hooks rules (set-state-in-effect, refs,
      // purity, incompatible-library, …) are React Compiler's: they tell
      // what the compiler could not optimise. This build has no compiler,
      // and the message list needs @tanstack/react-virtual, which one of
      // them flags on every use.
    },
  },
)
