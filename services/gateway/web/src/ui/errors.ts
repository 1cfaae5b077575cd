// What an error means to the person reading it.
// errorMeaning: what an ErrorMessage code means.
export function errorMeaning(code: number): string {
  switch (code) {
    case 101:
    case 102:
    case 103:
    case 104:
      return 'The server could not read what the page sent.'
    case 201:
      return 'Not found: the conversation or message no longer exists.'
    case 202:
      return 'That cannot be done here (for example, editing the first message).'
    case 203:
      return 'Not allowed.'
    case 501:
      return 'Something went wrong on the server.'
    case 503:
      return 'The model is not answering right now. Try again once it is back.'
    case 504:
      return 'The page fell behind; it reconnects by itself.'
    case 505:
      return 'Over your allowance: the message says which one, and when it frees.'
    default:
      return code >= 300 && code < 400 ? 'A tool failed.' : 'An error occurred.'
  }
}

// messageOf is what a failed request or action says to the person: an
// Error's message (an ApiError's is the server's sentence), else the value.
export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e)
}
