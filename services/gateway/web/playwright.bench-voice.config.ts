// The voice benchmark of the web client (issue 13's figures): Chromium with
// a fake microphone playing the recording BenchmarkVoiceWebClient
// (services/e2e/web) made, against the stack with livekit-server
// it starts in its network namespace. Not a test; the normal configs never
// run it.
import { defineConfig } from '@playwright/test'
import { withFakeMicrophone } from './e2e/chromium'

const baseURL = process.env.ALICIA_WEB_BASE_URL
const mic = process.env.ALICIA_WEB_FAKE_MIC
if (!baseURL || !mic) throw new Error('ALICIA_WEB_BASE_URL or ALICIA_WEB_FAKE_MIC is not set: run through go test -bench VoiceWebClient ./services/e2e/web/')

export default defineConfig({
  testDir: 'bench-voice',
  testMatch: '**/*.bench.ts',
  workers: 1,
  fullyParallel: false,
  retries: 0,
  timeout: 15 * 60_000,
  expect: { timeout: 30_000 },
  reporter: 'list',
  outputDir: 'bench-results/playwright-voice',
  use: {
    baseURL,
    viewport: { width: 1280, height: 800 },
    screenshot: 'off',
    trace: 'off',
    actionTimeout: 20_000,
    permissions: ['microphone'],
    launchOptions: withFakeMicrophone(mic),
  },
  projects: [{ name: 'chromium', use: { browserName: 'chromium' } }],
})
