/// <reference lib="dom" />
// Every main action by keyboard alone: sign in, skip to the composer, send
// with Enter, stop, regenerate, vote, the conversation menu, and the other
// screens.
import { expect, test, type Page } from '@playwright/test'
import { body, completed, composer, lastAnswer, say, stack } from './fixtures'

// focusedName is the accessible name (roughly) of the focused element.
function focusedName(page: Page): Promise<string> {
  return page.evaluate(() => {
    const el = document.activeElement as HTMLElement | null
    if (!el || el === document.body) return ''
    const labelled = el.id ? document.querySelector(`label[for="${CSS.escape(el.id)}"]`)?.textContent : undefined
    return (el.getAttribute('aria-label') ?? labelled ?? el.textContent ?? '').replace(/\s+/g, ' ').trim()
  })
}

// tabTo presses Tab (Shift+Tab with back) until the focused element's name
// matches, and fails after max presses.
async function tabTo(page: Page, name: string | RegExp, { back = false, max = 80 } = {}): Promise<void> {
  const seen: string[] = []
  for (let i = 0; i < max; i++) {
    await page.keyboard.press(back ? 'Shift+Tab' : 'Tab')
    const n = await focusedName(page)
    seen.push(n)
    if (typeof name === 'string' ? n === name : name.test(n)) return
  }
  throw new Error(`Tab never reached ${name}; focus went through: ${seen.join(' | ')}`)
}

test('sign in, send, stop, regenerate, vote, rename and move around by keyboard', async ({ page }) => {
  await page.goto('/')
  await tabTo(page, 'API key')
  await page.keyboard.type(stack.aliceKey)
  await page.keyboard.press('Enter')
  await expect(page.getByText('alice (admin)')).toBeVisible()

  // The skip link comes first and leads to the conversation.
  await page.reload()
  await expect(page.getByText('alice (admin)')).toBeVisible()
  await page.keyboard.press('Tab')
  expect(await focusedName(page)).toBe('Skip to content')
  await page.keyboard.press('Enter')
  await tabTo(page, 'Message Alicia', { max: 5 })

  // Shift+Enter is a new line, Enter sends.
  await page.keyboard.type('Hello by keyboard')
  await page.keyboard.press('Shift+Enter')
  await page.keyboard.type('on two lines')
  await expect(composer(page)).toHaveValue('Hello by keyboard\non two lines')
  await page.keyboard.press('Enter')
  await page.waitForURL(/\/c\//)
  await expect(body(await completed(lastAnswer(page)))).toHaveText(/This is answer \d+ to your message\./)
  await expect(composer(page)).toBeFocused()

  // Regenerate the answer, then vote on the new one.
  await tabTo(page, 'Regenerate answer', { back: true })
  await page.keyboard.press('Enter')
  await expect(body(lastAnswer(page))).toHaveText(/This is answer 2 to your message\./)
  await completed(lastAnswer(page))
  await composer(page).focus()
  await tabTo(page, 'Vote up this answer', { back: true })
  await page.keyboard.press('Space')
  await expect(lastAnswer(page).getByRole('button', { name: 'Vote up this answer' })).toHaveAttribute('aria-pressed', 'true')

  // Stop a slow answer: the stop button follows the composer.
  await composer(page).focus()
  await page.keyboard.type(say.longStory)
  await page.keyboard.press('Enter')
  await expect(lastAnswer(page)).toContainText('Sentence 1 of the story.')
  await tabTo(page, 'Stop the answer', { max: 3 })
  await page.keyboard.press('Enter')
  await expect(lastAnswer(page).getByText('Stopped')).toBeVisible()

  // The conversation's menu: open, close with Escape, rename.
  await composer(page).focus()
  await tabTo(page, /^Actions for Hello by keyboard/, { back: true, max: 150 })
  await page.keyboard.press('Enter')
  expect(await focusedName(page)).toBe('Rename')
  await page.keyboard.press('Escape')
  await expect(page.getByRole('menu')).toHaveCount(0)
  await page.keyboard.press('Enter')
  expect(await focusedName(page)).toBe('Rename')
  await page.keyboard.press('Enter')
  await page.keyboard.press('ControlOrMeta+a')
  await page.keyboard.type('Renamed by keyboard')
  await page.keyboard.press('Enter')
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Renamed by keyboard')

  // The other screens, and back to a new conversation.
  await tabTo(page, 'Memories', { max: 150 })
  await page.keyboard.press('Enter')
  await expect(page.getByRole('heading', { name: 'Memories', level: 1 })).toBeVisible()
  await tabTo(page, 'Settings and status', { max: 3 })
  await page.keyboard.press('Enter')
  await expect(page.getByRole('heading', { name: 'Settings and status' })).toBeVisible()
  await tabTo(page, 'New conversation', { back: true, max: 150 })
  await page.keyboard.press('Enter')
  await expect(page).toHaveURL(`${stack.base}/`)
})
