/**
 * Multi-turn chats as a gateway sees them, for the tokenizer and gateway chat benchmarks:
 * conversations that share a 2,000-character system prompt, each turn a user message of about
 * 800 characters (the request) and then the assistant's answer of about 800, the conversations
 * advancing one turn at a time in turn. Seeded: every run sends the same text.
 */

/** A chat message as the requests carry it. */
export type ChatMessage = Record<string, unknown> & { role: string; content: string };

const WORDS = 'the a router cache of prefix worker token prompt fleet engine block model answer question why how when 42 2026 é 中文'.split(
  ' ',
);

/** Seeded text of about `chars` characters. */
function words(seed: { s: number }, chars: number): string {
  let out = '';
  while (out.length < chars) {
    seed.s = (Math.imul(seed.s, 1103515245) + 12345) >>> 0;
    out += `${WORDS[seed.s % WORDS.length]} `;
  }
  return out.trim();
}

/** Every request's messages, in the order a gateway sees them; request i belongs to conversation i % conversations. */
export function chatRequests(conversations: number, turns: number): ChatMessage[][] {
  const seed = { s: 12345 };
  const system = { role: 'system', content: words(seed, 2000) };
  const chats = Array.from({ length: conversations }, () => [system]);
  const out: ChatMessage[][] = [];
  for (let turn = 0; turn < turns; turn++)
    for (const messages of chats) {
      messages.push({ role: 'user', content: words(seed, 800) });
      out.push(messages.slice());
      messages.push({ role: 'assistant', content: words(seed, 800) });
    }
  return out;
}
