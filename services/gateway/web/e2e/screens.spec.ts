// Every main screen at 1280×800 and 390×844: axe-core finds no serious or
// critical violation, and a screenshot is saved as
// screenshots/<screen>-<width>.png.
import { expect, test, type Browser, type Page } from '@playwright/test'
import { api, ask, axe, completed, DESKTOP, json, lastAnswer, newChat, PHONE, say, shot, signIn, stack } from './fixtures'

let conversation = ''
let memoryId = ''

// One conversation with every kind of part, shown on the chat screen.
test.beforeAll(async ({ browser }: { browser: Browser }) => {
  const alice = await api(stack.aliceKey)
  memoryId = (await json<{ id: string }>(await alice.post('/v1/memories', { data: { content: 'Snorkwind the heron fishes at dawn', tags: ['birds'] } }))).id
  await alice.dispose()
  const context = await browser.newContext()
  const page = await context.newPage()
  await signIn(page, stack.aliceKey)
  conversation = await newChat(page, 'When does Snorkwind the heron fish?')
  await completed(lastAnswer(page))
  for (const text of [say.tool, say.think, say.markdown]) await ask(page, text)
  await context.close()
})

test.afterAll(async () => {
  const alice = await api(stack.aliceKey)
  if (memoryId) await alice.delete(`/v1/memories/${memoryId}`)
  await alice.dispose()
})

async function openParts(page: Page): Promise<void> {
  await expect(page.getByText('Used 1 memory')).toBeVisible()
  await page.getByText('Used 1 memory').click()
  await page.getByText(/^Reasoning \(/).click()
  await page.getByTestId('tool-use').getByRole('button', { name: /calculator/ }).click()
}

for (const size of [DESKTOP, PHONE]) {
  test.describe(`at ${size.width}×${size.height}`, () => {
    test.use({ viewport: size })

    test('sign-in', async ({ page }) => {
      await page.goto('/')
      await expect(page.getByRole('heading', { name: 'Sign in to Alicia' })).toBeVisible()
      await axe(page, 'sign-in')
      await shot(page, 'signin')
    })

    test('home', async ({ page }) => {
      await signIn(page, stack.aliceKey)
      await expect(page.getByRole('heading', { name: 'How can I help?' })).toBeVisible()
      await axe(page, 'home')
      await shot(page, 'home')
    })

    test('chat', async ({ page }) => {
      await signIn(page, stack.aliceKey, `/c/${conversation}`)
      await completed(lastAnswer(page))
      await expect(page.getByTestId('connection')).toHaveAttribute('data-status', 'open')
      // The Markdown renderer loads with the first answer: the picture waits for it.
      await expect(lastAnswer(page).locator('table')).toBeVisible()
      await shot(page, 'chat')
      await axe(page, 'chat')
      // The answers' parts opened, scrolled to the top of the conversation.
      await openParts(page)
      await page.getByRole('log', { name: 'Messages' }).evaluate((el) => el.scrollTo(0, 0))
      await axe(page, 'chat with its parts open')
      await shot(page, 'chat-parts')
    })

    test('memories', async ({ page }) => {
      await signIn(page, stack.aliceKey, '/memories')
      await expect(page.locator('li[data-memory-id]').filter({ hasText: 'Snorkwind' })).toBeVisible()
      await axe(page, 'memories')
      await shot(page, 'memories')
    })

    test('settings', async ({ page }) => {
      await signIn(page, stack.aliceKey, '/settings')
      await expect(page.getByTestId('engine-llm')).toContainText('answers')
      await expect(page.getByRole('list', { name: 'Tools' }).getByRole('checkbox').first()).toBeVisible()
      await axe(page, 'settings')
      await shot(page, 'settings')
    })

    test('not yours', async ({ page }) => {
      await signIn(page, stack.bobKey, `/c/${conversation}`)
      await expect(page.getByRole('heading', { name: 'This conversation is not yours' })).toBeVisible()
      await axe(page, 'not yours')
      await shot(page, 'notyours')
    })

    if (size.width < 768) {
      test('menu', async ({ page }) => {
        await signIn(page, stack.aliceKey, `/c/${conversation}`)
        await page.getByRole('button', { name: 'Open menu' }).click()
        const menu = page.getByRole('dialog', { name: 'Menu' })
        await expect(menu.getByRole('navigation', { name: 'Conversations' })).toBeVisible()
        // Its foot is on screen: sign out can be reached.
        await expect(menu.getByRole('button', { name: 'Sign out' })).toBeInViewport()
        await axe(page, 'menu')
        await shot(page, 'menu')
        await menu.getByRole('button', { name: 'Close menu' }).first().click()
        await expect(menu).toHaveCount(0)
      })
    }
  })
}
