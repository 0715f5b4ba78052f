import { Role } from '../auth/roles';
import {
  checkMessageContent,
  checkTitle,
  droppedTurnsToStore,
  isUniqueViolation,
  mayAccess,
  messageIdOf,
  ownerTokenOf,
  replayedMessage,
  replyOf,
  retentionCutoff,
  sequenceAllocationFailed,
  unusableConfigurationMessage,
} from './conversation-rules';

const actor = (role: Role, tokenUid: number, beUser = 0) => ({ role, tokenUid, beUser });

describe('conversation rules', () => {
  test('a title of 255 characters passes, 256 does not (characters, not bytes)', () => {
    expect(checkTitle('é'.repeat(255)).ok).toBe(true);
    expect(checkTitle('a'.repeat(256)).ok).toBe(false);
  });

  test('a message must have text and at most 1 MB', () => {
    expect(checkMessageContent('hi').ok).toBe(true);
    expect(checkMessageContent('  \n').ok).toBe(false);
    expect(checkMessageContent('a'.repeat(1_000_000)).ok).toBe(true);
    expect(checkMessageContent('a'.repeat(1_000_001)).ok).toBe(false);
  });

  test('a backend user\'s session belongs to every token acting as that user; one without a user to the token that opened it; ADMIN sees all', () => {
    expect(mayAccess(actor(Role.EDITOR, 1, 7), { beUser: 7 }, 0)).toBe(true);
    expect(mayAccess(actor(Role.EDITOR, 2, 8), { beUser: 7 }, 0)).toBe(false);
    expect(mayAccess(actor(Role.EDITOR, 3), { beUser: 0 }, 3)).toBe(true);
    expect(mayAccess(actor(Role.EDITOR, 4), { beUser: 0 }, 3)).toBe(false);
    // A session without a user and without an owner (written in TYPO3 by no user) is nobody's but ADMIN's.
    expect(mayAccess(actor(Role.EDITOR, 4), { beUser: 0 }, null)).toBe(false);
    expect(mayAccess(actor(Role.ADMIN, 9), { beUser: 7 }, null)).toBe(true);
    expect(ownerTokenOf(actor(Role.EDITOR, 5, 7))).toBe(0);
    expect(ownerTokenOf(actor(Role.EDITOR, 5))).toBe(5);
  });

  test('the stored history replays as {role, content}; other roles are left out', () => {
    expect([{ role: 'user', content: 'a' }, { role: 'system', content: 'x' }, { role: 'assistant', content: 'b' }].map(replayedMessage)).toEqual([
      { role: 'user', content: 'a' },
      null,
      { role: 'assistant', content: 'b' },
    ]);
  });

  test('only a completed run with an answer stores a reply, with the reported model and clamped counts', () => {
    const end = { status: 'COMPLETED', finalContent: 'ok', promptTokens: 3, completionTokens: 2, totalTokens: 5, model: 'gpt-x-2026' };
    expect(replyOf(end, 'fallback')).toEqual({ content: 'ok', model: 'gpt-x-2026', promptTokens: 3, completionTokens: 2, totalTokens: 5 });
    expect(replyOf({ ...end, model: undefined }, 'fallback')?.model).toBe('fallback');
    expect(replyOf({ ...end, promptTokens: -1, totalTokens: 2 ** 40 }, '')).toMatchObject({ promptTokens: 0, totalTokens: 4_294_967_295 });
    expect(replyOf({ ...end, status: 'FAILED' }, '')).toBeNull();
    expect(replyOf({ ...end, status: 'CANCELLED' }, '')).toBeNull();
    expect(replyOf({ ...end, finalContent: null }, '')).toBeNull();
  });

  test('nr_llm\'s texts, ids and windows', () => {
    expect(unusableConfigurationMessage('c', 'Configuration "c" is inactive.')).toBe('The configuration "c" this session was opened with is no longer usable: Configuration "c" is inactive.');
    expect(sequenceAllocationFailed(12).message).toBe('Could not allocate a message sequence for session 12 after 5 attempts.');
    expect(messageIdOf('u', 3)).toBe('u:3');
    expect(droppedTurnsToStore('', 2)).toBeNull();
    expect(droppedTurnsToStore('c', 0)).toBe(0);
    expect(retentionCutoff(10 * 86_400, 3)).toBe(7 * 86_400);
    expect(isUniqueViolation({ driverError: { code: 'ER_DUP_ENTRY' } })).toBe(true);
    expect(isUniqueViolation({ code: 'SQLITE_CONSTRAINT_UNIQUE' })).toBe(true);
    expect(isUniqueViolation({ code: 'SQLITE_BUSY' })).toBe(false);
  });
});
