// The LAN test: Chromium on another host (the "laptop" network namespace
// of TestLANVoice, services/e2e/lan) opens the HTTPS address
// `alicia up` printed on the "box", trusting only the CA that up made (an
// NSS database in the browser's HOME, never ignoreHTTPSErrors), signs in,
// talks with a fake microphone and installs the app; the same page over
// plain HTTP says why voice cannot start. Run it through
// `go test -run TestLANVoice -v ./services/e2e/lan/`. The
// browser and its fake microphone are the voice specs' (the same
// ALICIA_WEB_BASE_URL and ALICIA_WEB_FAKE_MIC).
import { defineConfig } from '@playwright/test'
import voice from './playwright.voice.config'

export default defineConfig({ ...voice, testDir: 'e2e-lan', outputDir: 'test-results-lan' })
