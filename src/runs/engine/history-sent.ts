/**
 * A conversation turn's REQUEST step names the stored history it sent
 * instead of copying it. Every turn sends the conversation again, so copies
 * made a conversation of n turns store O(n²) bytes in
 * `tx_nrllm_agentrun_event` (about 14 MB for 500 short turns), and writing
 * them was most of a long conversation's turn (bench/conversations.ts).
 *
 * What is stored: `messagesSent` without the history's messages, and
 * `historySent`: the session and the sequence the history ends at, where
 * runs of it sat in the messages sent, and what the whole history was (its
 * message count and a SHA-256 of it). A reader puts the history read again
 * back in place (`withHistory`); when what is stored now is no longer what was sent (the
 * conversation deleted or purged, a message of it deleted), the history is
 * left out and the step says so. The live step keeps every message.
 *
 * A history message is recognised by identity: the loop's transcript holds
 * the very message objects of the turn's history (a message the assembly
 * changed, the first user message carrying the skill block, is a new object
 * and is stored as sent).
 */
import crypto from 'node:crypto';
import type { ChatMessage } from '../../providers/adapters/types';
import { PrefixMemo } from '../../shared/prefix-memo';

export interface HistorySent {
  session: number;
  throughSequence: number;
  /** The whole history's message count and SHA-256 (of roles and texts) when it was sent: what a reader checks its history against. */
  count: number;
  digest: string;
  /** `[at, from, to]`: history[from..to) sat at messagesSent[at..at+to-from). In order, not overlapping. */
  runs: [number, number, number][];
}

/** Where the turn's history is stored (as `HistoryReference`). */
export interface HistoryAt {
  session: number;
  throughSequence: number;
}

/** The note a REQUEST step carries when its history could not be put back. */
export function historyLeftOutWarning(sent: HistorySent): string {
  const left = sent.runs.reduce((sum, [, from, to]) => sum + (to - from), 0);
  return `The ${left} message(s) of the conversation's history this request sent are left out: they are no longer stored as they were (the conversation or a message of it was deleted).`;
}

/** Where the history's messages sit in `messages`; null when none of them does. */
export function historySentOf(messages: readonly ChatMessage[], history: readonly ChatMessage[], at: HistoryAt): HistorySent | null {
  if (history.length === 0) return null;
  const runs: [number, number, number][] = [];
  // The history's messages keep their order in what is sent (a fit only leaves some out): each is looked for after the last found.
  let next = 0;
  for (let i = 0; i < messages.length && next < history.length; ) {
    const message = messages[i]!;
    // By identity first: a history message is not touched (prefix-memo says why that matters).
    const from = history[next] === message ? next : message.role === 'system' || message.role === 'tool' ? -1 : history.indexOf(message, next);
    if (from < 0) {
      i += 1;
      continue;
    }
    // The messages after it that follow the history in place, in one tight walk (a long conversation's history is one run).
    let to = from + 1;
    let j = i + 1;
    while (j < messages.length && to < history.length && messages[j] === history[to]) {
      j += 1;
      to += 1;
    }
    const last = runs[runs.length - 1];
    if (last && last[0] + (last[2] - last[1]) === i && last[2] === from) last[2] = to;
    else runs.push([i, from, to]);
    next = to;
    i = j;
  }
  if (runs.length === 0) return null;
  return { session: at.session, throughSequence: at.throughSequence, count: history.length, digest: sentDigestOf(history), runs };
}

/** The messages as stored: those of the history taken out. */
export function withoutHistory(messages: readonly ChatMessage[], sent: HistorySent): ChatMessage[] {
  const out: ChatMessage[] = [];
  let next = 0;
  for (const [at, from, to] of sent.runs) {
    for (; next < at; next += 1) out.push(messages[next]!);
    next = at + (to - from);
  }
  for (; next < messages.length; next += 1) out.push(messages[next]!);
  return out;
}

/**
 * The messages as sent, the history read again put back in place; with
 * `complete: false` (and the stored messages alone) when `history` is null
 * or is not the history that was sent.
 */
export function withHistory(stored: readonly ChatMessage[], sent: HistorySent, history: readonly ChatMessage[] | null): { messages: ChatMessage[]; complete: boolean } {
  if (!history || history.length !== sent.count || digestOf(history) !== sent.digest || !runsFit(sent, stored.length)) return { messages: [...stored], complete: false };
  const out: ChatMessage[] = [];
  let next = 0;
  for (const [at, from, to] of sent.runs) {
    while (out.length < at) out.push(stored[next++]!);
    for (let i = from; i < to; i += 1) out.push(history[i]!);
  }
  while (next < stored.length) out.push(stored[next++]!);
  return { messages: out, complete: true };
}

/** A stored `historySent` read back, checked; null for anything else (a payload written elsewhere). */
export function asHistorySent(value: unknown): HistorySent | null {
  if (!value || typeof value !== 'object') return null;
  const { session, throughSequence, count, digest, runs } = value as Record<string, unknown>;
  if (![session, throughSequence, count].every(Number.isSafeInteger) || typeof digest !== 'string' || !Array.isArray(runs)) return null;
  const checked: [number, number, number][] = [];
  for (const run of runs) {
    if (!Array.isArray(run) || run.length !== 3 || !run.every((n) => Number.isSafeInteger(n) && (n as number) >= 0)) return null;
    const [at, from, to] = run as [number, number, number];
    if (to <= from || to > (count as number)) return null;
    checked.push([at, from, to]);
  }
  return { session: session as number, throughSequence: throughSequence as number, count: count as number, digest, runs: checked };
}

/** Whether the runs are in order and leave exactly `storedLength` messages around them. */
function runsFit(sent: HistorySent, storedLength: number): boolean {
  let expanded = 0;
  let stored = 0;
  for (const [at, from, to] of sent.runs) {
    if (at < expanded) return false;
    stored += at - expanded;
    expanded = at + (to - from);
  }
  return stored <= storedLength;
}

/**
 * The history's fingerprint: a session made again under a reused uid (an
 * auto-increment counter reset after a restart) with as many messages is
 * never taken for the one that was sent. Read back, a history is hashed
 * anew; a REQUEST being sent goes on from the last turn's hash (`sentDigestOf`).
 */
function digestOf(messages: readonly ChatMessage[]): string {
  const hash = crypto.createHash('sha256');
  for (const message of messages) hashMessage(hash, message);
  return hash.digest('base64');
}

function hashMessage(hash: crypto.Hash, message: ChatMessage): void {
  hash.update(`${message.role}\u0000${message.content ?? ''}\u0000`);
}

/** `digestOf` for a REQUEST being sent: a history that extends one hashed before goes on from its state (prefix-memo). */
function sentDigestOf(messages: readonly ChatMessage[]): string {
  return sentDigests.of(messages).digest('base64');
}

const sentDigests = new PrefixMemo<ChatMessage, crypto.Hash>({ empty: () => crypto.createHash('sha256'), copy: (hash) => hash.copy(), add: hashMessage });
