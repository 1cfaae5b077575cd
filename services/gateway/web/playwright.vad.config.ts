// The in-page VAD's browser tests: Chromium with a fake microphone playing
// speech in noise (TestVoiceBrowserVAD in services/e2e/web synthesises it), in
// the test's network namespace with livekit-server and the whole stack:
// `go test -run TestVoiceBrowserVAD -v ./services/e2e/web/`.
import { defineConfig } from '@playwright/test'
import { withFakeMicrophone } from './e2e/chromium'

const baseURL = process.env.ALICIA_WEB_BASE_URL
const mic = process.env.ALICIA_WEB_FAKE_MIC
if (!baseURL || !mic) throw new Error('ALICIA_WEB_BASE_URL or ALICIA_WEB_FAKE_MIC is not set: run through go test -run TestVoiceBrowserVAD ./services/e2e/web/')

export default defineConfig({
  testDir: 'e2e-voice-vad',
  workers: 1,
  fullyParallel: false,
  forbidOnly: !!process.env.CI,
  retries: 0,
  timeout: 120_000,
  expect: { timeout: 20_000 },
  reporter: 'list',
  outputDir: 'test-results-voice-vad',
  use: {
    baseURL,
    viewport: { width: 1280, height: 800 },
    screenshot: 'only-on-failure',
    trace: 'off',
    actionTimeout: 10_000,
    permissions: ['microphone'],
    launchOptions: withFakeMicrophone(mic),
  },
  projects: [{ name: 'chromium', use: { browserName: 'chromium' } }],
})
