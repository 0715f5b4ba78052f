/**
 * Conversations on nr_llm's `tx_nrllm_ai_session(_message)`: every turn is
 * a run (its steps stream over runTrace like any run's), with the two
 * message rows written around it as nr_llm writes them: the user message
 * in the transaction that stores the run (before any provider call), the
 * reply in the transaction that stores the run's END.
 */
import crypto from 'node:crypto';
import type { EntityManager } from 'typeorm';
import type { Caller } from '../auth/roles';
import type { ConfigurationEntity } from '../configurations/configuration.entity';
import type { ConfigurationService } from '../configurations/configuration.service';
import type { KeysetPage, PagingCursors } from '../db/keyset';
import type { Logger } from '../logger';
import type { ChatMessage } from '../providers/adapters/types';
import type { EndStep, HistoryReference, RunService, RunView, StartRunRequest, TraceBus } from '../runs';
import { eventStream } from '../prompt-history/event-stream';
import { isOpenRunStatus } from '../runs';
import { BadUserInputError, ConflictError, NotFoundError } from '../shared/errors';
import { unixNow } from '../shared/time';
import type { AiSessionMessageEntity } from './ai-session-message.entity';
import { streamTurn, type ChatTurn } from './chat-stream';
import { HistoryCache } from './history-cache';
import { early, SessionGuesses, type SessionKey } from './turn-prefetch';
import type { UIMessageChunk } from './ui-message-stream';
import type { AiSessionEntity } from './ai-session.entity';
import { CONVERSATION_KEY_KINDS, CONVERSATION_LIST, type ConversationListFilter, type ConversationRepository, type HistoryRow, type StoredConversation } from './conversation.repository';
import type { ConversationOwnerEntity } from './conversation-owner.entity';
import {
  checkMessageContent,
  checkTitle,
  droppedTurnsToStore,
  mayAccess,
  messageIdOf,
  ownerTokenOf,
  replyOf,
  retentionCutoff,
  unusableConfigurationMessage,
  type ChatToolDecision,
  type ChatTurnOptions,
  type ConversationActor,
} from './conversation-rules';

/** The run options a turn may set (the rest of a run follows the session's configuration). */
export type TurnOptions = Pick<StartRunRequest, 'tools' | 'approvalRequired' | 'approvalTimeoutSeconds' | 'maxRounds' | 'maxTokens' | 'temperature' | 'stream' | 'maxTotalTokens' | 'maxCost'>;

export interface SentMessage {
  conversation: StoredConversation;
  userMessage: AiSessionMessageEntity;
  run: RunView;
}


export class ConversationService {
  /** The sessions' histories between turns (see history-cache). */
  private readonly historyCache: HistoryCache;
  /** What each session's last turn here read first (see turn-prefetch). */
  private readonly guesses = new SessionGuesses();

  constructor(
    private readonly repository: ConversationRepository,
    private readonly configurations: Pick<ConfigurationService, 'findByIdentifier' | 'findDefault'>,
    private readonly runs: () => RunService,
    /** The bus the runs publish on (their steps, and the conversations' channels); asked lazily, as runs. */
    private readonly bus: () => TraceBus,
    private readonly cursors: PagingCursors,
    private readonly logger: Logger,
  ) {
    this.historyCache = new HistoryCache(repository);
  }

  /** Opens a session on `configuration` ('' or absent: the installation's default, resolved on each turn). */
  async start(caller: Caller, input: { configuration?: string | null; title?: string | null }): Promise<AiSessionEntity> {
    const title = input.title ?? '';
    const titleCheck = checkTitle(title);
    if (!titleCheck.ok) throw new BadUserInputError(titleCheck.message, 'title');
    let identifier = '';
    if (input.configuration != null && input.configuration.trim() !== '') {
      const configuration = await this.configurations.findByIdentifier(input.configuration);
      if (!configuration) throw new NotFoundError(`No configuration with identifier "${input.configuration}"`, 'configuration');
      if (!configuration.isActive) throw new BadUserInputError(`The configuration "${configuration.identifier}" is inactive`, 'configuration');
      identifier = configuration.identifier;
    }
    const session = await this.repository.create({ uuid: crypto.randomUUID(), beUser: caller.beUser, configurationIdentifier: identifier, title, ownerToken: ownerTokenOf(actorOf(caller)) });
    this.logger.info({ conversation: session.uuid, configuration: identifier, by: caller.name }, 'conversation started');
    return session;
  }

  /** A session the caller may see; null when there is none or it is someone else's (existence does not leak). */
  async get(caller: Caller, uuid: string): Promise<StoredConversation | null> {
    const stored = await this.repository.findByUuid(uuid);
    if (!stored || !this.mayAccess(caller, stored)) return null;
    return stored;
  }

  /** A page of a session's messages after `afterSequence` (-1: from the first). */
  messages(sessionUid: number, afterSequence: number, first: number): Promise<AiSessionMessageEntity[]> {
    return this.repository.messagePage(sessionUid, afterSequence, first);
  }

  /** The caller's sessions (ADMIN: everyone's), newest activity first. */
  page(caller: Caller, filter: ConversationListFilter, first: number, after: string | null): Promise<KeysetPage<StoredConversation>> {
    const scope = { all: caller.role === 'ADMIN', beUser: caller.beUser, tokenUid: caller.tokenUid };
    return this.cursors.readPage(CONVERSATION_LIST, CONVERSATION_KEY_KINDS, this.repository.listed(scope, filter), first, after);
  }

  /** Deletes a session the caller may see with its messages; NOT_FOUND otherwise. */
  async delete(caller: Caller, uuid: string): Promise<void> {
    const stored = await this.get(caller, uuid);
    if (!stored) throw conversationNotFound(uuid);
    await this.repository.delete(stored.session.uid);
    this.historyCache.forget(stored.session.uid);
    this.guesses.forget(uuid);
    this.bus().publish(channelOf(uuid), { type: 'run-changed', runId: '' });
    this.logger.info({ conversation: uuid, by: caller.name }, 'conversation deleted');
  }

  /**
   * The conversation now, then again each time it changes (a turn taken, a
   * reply stored), on whichever instance; ends when it is deleted. The
   * signals come from the bus the runs use (a turn's start on the
   * conversation's channel, its END on its run's); each is answered by
   * reading the conversation again, so a lost signal costs nothing the next
   * one does not bring back.
   */
  async *watch(caller: Caller, uuid: string): AsyncGenerator<StoredConversation, void, undefined> {
    const bus = this.bus();
    let followed = '';
    let stopRun: (() => void) | null = null;
    let push: (signal: 'changed' | 'deleted') => void = () => undefined;
    const follow = (runId: string) => {
      if (runId === followed) return;
      stopRun?.();
      stopRun = null;
      followed = runId;
      if (runId !== '') {
        stopRun = bus.subscribe(runId, (message) => {
          if ((message.type === 'step' && message.step.kind === 'end') || message.type === 'reconnected') push('changed');
        });
      }
    };
    // Listening before the first read: a turn that starts meanwhile is not missed.
    const signals = eventStream<'changed' | 'deleted'>((pushSignal) => {
      push = pushSignal;
      const stop = bus.subscribe(channelOf(uuid), (message) => pushSignal(message.type === 'run-changed' && message.runId === '' ? 'deleted' : 'changed'));
      return () => {
        stop();
        follow('');
      };
    }, 16);
    try {
      let last = await this.get(caller, uuid);
      if (!last) throw conversationNotFound(uuid);
      yield last;
      follow(last.owner?.activeRun ?? '');
      // The turn followed may have ended before its channel was listened to.
      if (followed !== '') push('changed');
      for await (const signal of signals) {
        if (signal === 'deleted') return;
        const now = await this.get(caller, uuid);
        if (!now) return;
        follow(now.owner?.activeRun ?? '');
        if (!sameState(last, now)) {
          last = now;
          yield now;
        }
      }
    } finally {
      await signals.return?.();
    }
  }

  /**
   * One turn, in nr_llm's order: the session must exist and be the
   * caller's; its configuration must still be usable; the history is read
   * and the context fit made; then, in one transaction, the conversation is
   * taken for this turn, the user message stored at the next sequence and
   * the run stored. The run's END stores the reply (`storeReply`). Every
   * refusal writes nothing.
   */
  async send(caller: Caller, input: TurnInput, origin: { trace?: unknown } = {}): Promise<SentMessage> {
    const contentCheck = checkMessageContent(input.content ?? '');
    if (!contentCheck.ok) throw new BadUserInputError(contentCheck.message, 'content');
    const guess = this.guesses.guess(input.conversationId);
    if (guess) {
      const sent = await this.sendOnGuess(caller, input, origin, guess);
      if (sent) return sent;
    }
    const stored = await this.get(caller, input.conversationId);
    if (!stored) throw conversationNotFound(input.conversationId);
    const { session, owner } = stored;
    // The reads at once; their refusals in nr_llm's order (busy, then the configuration).
    const [idle, usable, read] = await Promise.all([early(this.idleOrThrow(owner?.activeRun ?? '')), early(this.turnConfiguration(session.configurationIdentifier)), early(this.historyCache.read(session.uid))]);
    const expectedRun = settled(idle);
    const configuration = settled(usable);
    return this.take(caller, input, origin, configuration, Promise.resolve({ session, owner, expectedRun, history: settled(read) }));
  }

  /**
   * A turn of a session this instance served before (turn-prefetch): its
   * configuration, session and history are read at once, and the run is
   * prepared while the session and the history are still being read and
   * checked. Null when the guess no longer holds or the configuration is
   * refused: nothing was written, and `send` goes the way without a guess
   * (which gives the refusals in their order).
   */
  private async sendOnGuess(caller: Caller, input: TurnInput, origin: { trace?: unknown }, guess: SessionKey): Promise<SentMessage | null> {
    // The configuration first, as a run reads it; the session and the history then go alongside the run's other reads.
    const configuration = await early(this.turnConfiguration(guess.configurationIdentifier));
    if (configuration.status === 'rejected') return null;
    const facts = (async (): Promise<TurnFacts> => {
      const { stored, history } = await this.readTurn(caller, input.conversationId, guess.uid);
      if (!stored) throw conversationNotFound(input.conversationId);
      const { session, owner } = stored;
      if (session.uid !== guess.uid || session.configurationIdentifier !== guess.configurationIdentifier) throw new GuessMissed();
      const expectedRun = await this.idleOrThrow(owner?.activeRun ?? '');
      return { session, owner, expectedRun, history: await history() };
    })();
    try {
      return await this.take(caller, input, origin, configuration.value, facts);
    } catch (error) {
      if (error instanceof GuessMissed) return null;
      throw error;
    }
  }

  /**
   * Runs the turn: the run is prepared (on `facts` still being read, when
   * they are), and stored in one transaction with the conversation taken and
   * the user message written. A refusal of `facts` comes before the run's
   * own; either writes nothing.
   */
  private async take(caller: Caller, input: TurnInput, origin: { trace?: unknown }, configuration: ConfigurationEntity, facts: Promise<TurnFacts>): Promise<SentMessage> {
    const { conversationId: _id, content, ...options } = input;
    const known: { facts?: TurnFacts } = {};
    const turn = facts.then((checked) => {
      known.facts = checked;
      return { history: this.historyCache.replay(checked.history), conversation: { session: checked.session.uid, throughSequence: lastSequenceOf(checked.history) } };
    });
    // A refusal is thrown below through `facts`, also when `start` refused the request before it waited for the turn.
    turn.catch(() => undefined);
    const request: StartRunRequest = {
      ...options,
      configuration: configuration.identifier,
      prompt: content,
      // A conversation is plain chat unless the turn names tools (as nr_llm's).
      tools: options.tools ?? [],
      sendOverBudget: true,
    };
    let userMessage: AiSessionMessageEntity | null = null;
    let run: RunView;
    try {
      run = await this.runs().start(request, caller, origin, {
        configuration,
        turn,
        onCreated: async (manager, created, firstFit) => {
          const { session, owner, expectedRun, history } = known.facts!;
          const throughSequence = lastSequenceOf(history);
          // Another turn took the conversation between the check and now: nothing is stored.
          // Taken, and touched for the slot after the history read; a writer that took that slot since moves the message on.
          if (!(await this.repository.claimTurn(manager, session.uid, expectedRun, created, owner !== null, throughSequence + 1))) throw new TurnTaken();
          const message = { role: 'user' as const, content, model: '', promptTokens: 0, completionTokens: 0, totalTokens: 0, droppedTurns: droppedTurnsToStore(session.configurationIdentifier, firstFit.droppedTurns) };
          const sequence = await this.repository.appendMessage(manager, session.uid, message, throughSequence + 1);
          if (sequence !== throughSequence + 1) await this.repository.touch(manager, session.uid, sequence + 1);
          userMessage = Object.assign({} as AiSessionMessageEntity, { uid: 0, pid: 0, session: session.uid, sequence, crdate: unixNow(), ...message });
        },
      });
    } catch (error) {
      // The turn's own refusal (not found, busy, a guess that no longer holds) before the run's.
      const checked = await early(facts);
      if (checked.status === 'rejected') throw checked.reason;
      // Read outside the rolled-back transaction: its connection is not held while another is asked for.
      if (error instanceof TurnTaken) throw busy((await this.repository.findByUuid(checked.value.session.uuid))?.owner?.activeRun ?? '');
      throw error;
    }
    const { session, owner } = known.facts!;
    const now = unixNow();
    const sent = userMessage as AiSessionMessageEntity | null;
    if (!sent) throw new Error('the turn stored no user message');
    this.guesses.remember(session.uuid, session);
    // Stored (the transaction committed): watchers read the conversation again.
    this.bus().publish(channelOf(session.uuid), { type: 'run-changed', runId: run.row.uuid });
    return {
      conversation: { session: Object.assign({} as AiSessionEntity, session, { messageCount: Math.max(session.messageCount, sent.sequence + 1), lastActivity: Math.max(session.lastActivity, now) }), owner: { sessionUid: session.uid, ownerToken: owner?.ownerToken ?? 0, activeRun: run.row.uuid, activeRunUid: run.row.uid } },
      userMessage: sent,
      run,
    };
  }

  /**
   * In the transaction of a run's END: a turn's run stores its reply (only a
   * completed run with an answer; nr_llm keeps a failed turn's user message
   * without one) and leaves the conversation idle. Other runs pass through
   * with one statement that finds no turn.
   */
  async storeReply(manager: EntityManager, ended: { runUid: number; end: EndStep }): Promise<void> {
    const reply = replyOf(ended.end, '');
    if (reply) await this.repository.storeReplyOfRun(manager, ended.runUid, { role: 'assistant', ...reply, droppedTurns: null });
    else await this.repository.releaseRun(manager, ended.runUid);
  }

  /** `send` for a chat client (`POST /api/chat`): the turn's run, streamed, and the id its reply will be stored under. */
  async sendForChat(caller: Caller, conversationId: string, content: string, options: ChatTurnOptions = {}, origin: { trace?: unknown } = {}): Promise<ChatTurn> {
    const sent = await this.send(caller, { conversationId, content, ...options, stream: true }, origin);
    return { runId: sent.run.row.uuid, messageId: messageIdOf(sent.conversation.session.uuid, sent.userMessage.sequence + 1) };
  }

  /**
   * A chat client's decisions on the tool calls its turn waits on
   * (`addToolApprovalResponse`), taken as `resolveToolApproval` takes them;
   * the turn then streams on from after the steps the client has already
   * shown. CONFLICT when the conversation's turn waits for no decision.
   */
  async decideForChat(caller: Caller, conversationId: string, decisions: readonly ChatToolDecision[]): Promise<ChatTurn> {
    const stored = await this.get(caller, conversationId);
    if (!stored) throw conversationNotFound(conversationId);
    const runId = stored.owner?.activeRun ?? '';
    const waiting = runId === '' ? null : await this.runs().store.waitingRun(runId);
    if (!waiting || waiting.row.status !== 'WAITING_FOR_APPROVAL') {
      throw new ConflictError('The conversation has no turn waiting for a decision on a tool call: nothing to approve or deny.', 'conversationId', runId === '' ? {} : { runId });
    }
    const shown = waiting.steps[waiting.steps.length - 1]?.sequence ?? 0;
    await this.runs().approvals.resolve(runId, decisions, caller);
    return { runId, messageId: messageIdOf(stored.session.uuid, stored.session.messageCount), after: shown };
  }

  /**
   * The turn under way in a conversation the caller may see (null when it is
   * idle), with the id its reply will be stored under: the next sequence,
   * since the turn holds the conversation until its reply is stored.
   */
  async activeTurn(caller: Caller, conversationId: string): Promise<ChatTurn | null> {
    const stored = await this.get(caller, conversationId);
    if (!stored) throw conversationNotFound(conversationId);
    const runId = stored.owner?.activeRun ?? '';
    if (runId === '') return null;
    const row = await this.runs().store.findRun(runId);
    if (!row || !isOpenRunStatus(row.status)) return null;
    return { runId, messageId: messageIdOf(stored.session.uuid, stored.session.messageCount) };
  }

  /** A turn as the AI SDK's UI message stream, from its first step (see chat-stream). */
  streamTurn(turn: ChatTurn): AsyncGenerator<UIMessageChunk, void, undefined> {
    return streamTurn(this.runs().reader, turn);
  }

  /** A turn's history again, for its run going on after approval or a takeover. */
  async history(reference: HistoryReference): Promise<ChatMessage[]> {
    return this.historyCache.replay(await this.historyCache.read(reference.session, reference.throughSequence));
  }

  /** Deletes the sessions idle for longer than `retentionDays`; how many. */
  purge(retentionDays: number): Promise<number> {
    return this.repository.purgeInactiveSince(retentionCutoff(unixNow(), retentionDays));
  }

  /**
   * The session behind `uuid` if the caller may see it, and its history
   * (session `sessionUid`'s, used only once the session read is found to be
   * that one): in one statement while the history is remembered, else the
   * two reads at once.
   */
  private async readTurn(caller: Caller, uuid: string, sessionUid: number): Promise<{ stored: StoredConversation | null; history: () => Promise<readonly HistoryRow[]> }> {
    const since = this.historyCache.since(sessionUid);
    if (since === null) {
      const read = early(this.historyCache.read(sessionUid));
      return { stored: await this.get(caller, uuid), history: async () => settled(await read) };
    }
    const answer = await this.repository.findWithMessagesSince(uuid, sessionUid, since);
    const stored = answer.stored && this.mayAccess(caller, answer.stored) ? answer.stored : null;
    return { stored, history: async () => this.historyCache.kept(sessionUid, since, answer) ?? this.historyCache.read(sessionUid) };
  }

  private mayAccess(caller: Caller, stored: StoredConversation): boolean {
    return mayAccess(actorOf(caller), stored.session, stored.owner?.ownerToken ?? null);
  }

  /** '' when the conversation is idle; a run that ended without leaving it idle is returned to be replaced; a running turn is a CONFLICT. */
  private async idleOrThrow(activeRun: string): Promise<string> {
    if (activeRun === '') return '';
    const row = await this.runs().store.findRun(activeRun);
    if (row && isOpenRunStatus(row.status)) throw busy(activeRun);
    return activeRun;
  }

  /**
   * The configuration a turn runs on, resolved again on every turn: the
   * session's (`identifier`), which must still exist and be active, or for '' the
   * installation's default. Refused before anything is written.
   */
  private async turnConfiguration(identifier: string): Promise<ConfigurationEntity> {
    if (identifier === '') {
      const fallback = await this.configurations.findDefault();
      if (!fallback) throw new BadUserInputError('This conversation runs on the default configuration, and no active configuration is marked as the default', 'conversationId');
      return fallback;
    }
    const configuration = await this.configurations.findByIdentifier(identifier);
    if (!configuration) throw new BadUserInputError(unusableConfigurationMessage(identifier, `No configuration with identifier "${identifier}" exists.`), 'conversationId');
    if (!configuration.isActive) throw new BadUserInputError(unusableConfigurationMessage(identifier, `Configuration "${identifier}" is inactive.`), 'conversationId');
    return configuration;
  }
}

/** The bus channel a conversation's changes are announced on (run ids are bare uuids: no clash). */
function channelOf(uuid: string): string {
  return `conversation:${uuid}`;
}

/** Whether a watcher has seen this state already. */
function sameState(a: StoredConversation, b: StoredConversation): boolean {
  return a.session.messageCount === b.session.messageCount && a.session.lastActivity === b.session.lastActivity && a.session.title === b.session.title && (a.owner?.activeRun ?? '') === (b.owner?.activeRun ?? '');
}

/** A settled promise's value, or its reason thrown. */
function settled<T>(result: PromiseSettledResult<T>): T {
  if (result.status === 'rejected') throw result.reason;
  return result.value;
}

/** A turn found the conversation taken by another inside its transaction (which then stores nothing). */
class TurnTaken extends Error {}

/** The session read now is not the one a turn's early reads started from (turn-prefetch): nothing was written. */
class GuessMissed extends Error {}

/** What a turn has read and checked of its conversation before it is stored. */
interface TurnFacts {
  session: AiSessionEntity;
  owner: ConversationOwnerEntity | null;
  /** The run the conversation names now ('' idle; an ended run's to replace). */
  expectedRun: string;
  history: readonly HistoryRow[];
}

type TurnInput = { conversationId: string; content: string } & TurnOptions;

/** The sequence a history ends at (-1: none). */
function lastSequenceOf(history: readonly HistoryRow[]): number {
  return history.length > 0 ? history[history.length - 1]!.sequence : -1;
}

function actorOf(caller: Caller): ConversationActor {
  return { role: caller.role, tokenUid: caller.tokenUid, beUser: caller.beUser };
}

/** The refusal for a conversation that does not exist or is not the caller's (the two are not told apart). */
export function conversationNotFound(uuid: string): NotFoundError {
  return new NotFoundError(`Unknown conversation "${uuid}".`, 'conversationId');
}

function busy(runId: string): ConflictError {
  return new ConflictError(`The conversation is busy: its turn's run "${runId}" has not ended yet. Send the next message once it has (watch runTrace), or cancel that run.`, 'conversationId', { runId });
}
