/**
 * The chat endpoint a Vercel AI SDK `useChat` front end talks to unchanged
 * (its `DefaultChatTransport` with `api: '/api/chat'`):
 *
 * - `POST /api/chat` with `{id, messages}`: one turn of conversation `id`
 *   with the last user message (`sendMessage`'s rules; `tools` and
 *   `approvalRequired` in the body as its), answered as the UI message
 *   stream of the turn's run; or, when the last message is the assistant's
 *   with answered approvals (`addToolApprovalResponse`), those decisions
 *   (`resolveToolApproval`'s rules) and the rest of the turn streamed;
 * - `GET /api/chat/{id}/stream`: the turn under way replayed from its first
 *   step and followed to its end (`useChat`'s resume), or 204 when idle.
 *
 * Both need an API token as `Authorization: Bearer …` (401 otherwise), as
 * GraphQL does. A refusal is a JSON `{errors: [{message, extensions: {code}}]}`
 * with the HTTP status of its code, and nothing written.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { roleAtLeast, Role, type Caller } from '../auth/roles';
import { CLIENT_GONE, HttpError, answerRefusedBody, readBody } from '../http-body';
import { drained } from '../http-response';
import type { Logger } from '../logger';
import { AppError, BadUserInputError, ForbiddenError, NotFoundError, UnauthenticatedError, type ErrorCode } from '../shared/errors';
import type { ChatTurn } from './chat-stream';
import { conversationNotFound, type ConversationService } from './conversation.service';
import { readChatRequest } from './conversation-rules';
import { SSE_DONE, sseEvent, UI_MESSAGE_STREAM_HEADERS, type UIMessageChunk } from './ui-message-stream';

export const CHAT_PATH = '/api/chat';
const RESUME_PATH = /^\/api\/chat\/([^/]+)\/stream$/;

export interface ChatEndpoint {
  /** Whether the path is the endpoint's. */
  owns(pathname: string): boolean;
  handle(request: IncomingMessage, response: ServerResponse, pathname: string, origin: { requestId: string; trace?: unknown }): Promise<void>;
  /** Ends the open streams (at shutdown, once the runs are drained). */
  close(): void;
}

export function createChatEndpoint(deps: {
  conversations: () => ConversationService;
  authenticate: (authorization: unknown) => Promise<{ caller: Caller | null }>;
  bodyLimitBytes: number;
  logger: Logger;
}): ChatEndpoint {
  const open = new Set<() => void>();

  async function turnOf(request: IncomingMessage, response: ServerResponse, pathname: string, caller: Caller, origin: { trace?: unknown }): Promise<ChatTurn | null | 'answered'> {
    if (pathname === CHAT_PATH) {
      if (request.method !== 'POST') throw new MethodNotAllowed('POST');
      if (!roleAtLeast(caller.role, Role.EDITOR)) throw new ForbiddenError('Sending a message needs an EDITOR or ADMIN token');
      if (!/^application\/json\b/i.test(request.headers['content-type'] ?? '')) throw new BadUserInputError('The body must be JSON (content-type: application/json).');
      let text: string;
      try {
        text = await readBody(request, deps.bodyLimitBytes);
      } catch (error) {
        if (error instanceof HttpError && error.status === CLIENT_GONE) return 'answered';
        if (error instanceof HttpError) {
          answerRefusedBody(request, response, error.status, JSON.stringify(errorBody(error.message, 'BAD_USER_INPUT')));
          return 'answered';
        }
        throw error;
      }
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        throw new BadUserInputError('The request body is not valid JSON.');
      }
      const chat = readChatRequest(body);
      if (!chat.ok) throw new BadUserInputError(chat.message);
      if (chat.kind === 'decisions') return deps.conversations().decideForChat(caller, chat.conversationId, chat.decisions);
      return deps.conversations().sendForChat(caller, chat.conversationId, chat.content, chat.options, origin);
    }
    const resume = RESUME_PATH.exec(pathname);
    if (!resume) throw new NotFoundError(`Not found. The chat endpoint is POST ${CHAT_PATH} and GET ${CHAT_PATH}/{id}/stream.`);
    if (request.method !== 'GET') throw new MethodNotAllowed('GET');
    return deps.conversations().activeTurn(caller, conversationIdOf(resume[1]!));
  }

  async function stream(response: ServerResponse, chunks: AsyncGenerator<UIMessageChunk, void, undefined>): Promise<void> {
    response.writeHead(200, UI_MESSAGE_STREAM_HEADERS);
    response.flushHeaders();
    let gone = false;
    const stop = () => {
      gone = true;
      void chunks.return();
    };
    // The client leaving ends only its stream: the turn goes on, and a GET resumes it.
    response.once('close', stop);
    open.add(stop);
    try {
      for await (const chunk of chunks) {
        if (gone) break;
        if (!response.write(sseEvent(chunk))) await drained(response);
      }
      if (!gone) response.end(SSE_DONE);
    } finally {
      open.delete(stop);
      response.off('close', stop);
      if (!response.writableEnded) response.end();
    }
  }

  return {
    owns: (pathname) => pathname === CHAT_PATH || pathname.startsWith(`${CHAT_PATH}/`),
    async handle(request, response, pathname, origin) {
      try {
        const { caller } = await deps.authenticate(request.headers.authorization);
        if (!caller) throw new UnauthenticatedError('The chat endpoint needs a valid API token as "Authorization: Bearer TOKEN".');
        const turn = await turnOf(request, response, pathname, caller, origin);
        if (turn === 'answered') return;
        if (turn === null) {
          response.writeHead(204);
          response.end();
          return;
        }
        await stream(response, deps.conversations().streamTurn(turn));
      } catch (error) {
        if (response.headersSent) {
          deps.logger.warn({ err: error, requestId: origin.requestId }, 'a chat stream failed');
          response.end();
          return;
        }
        refuse(response, error, deps.logger, origin.requestId);
      }
    },
    close() {
      for (const stop of [...open]) stop();
    },
  };
}

/** The conversation id in a resume path; one that is not even valid percent-encoding names no conversation. */
function conversationIdOf(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw conversationNotFound(segment);
  }
}

class MethodNotAllowed extends Error {
  constructor(readonly allow: string) {
    super(`Use ${allow} here.`);
  }
}

const STATUS_OF: Record<ErrorCode, number> = {
  BAD_USER_INPUT: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  SUBSCRIBER_LAGGED: 409,
  SERVICE_UNAVAILABLE: 503,
};

function errorBody(message: string, code: string, details?: Readonly<Record<string, unknown>>): unknown {
  return { errors: [{ message, extensions: { code, ...details } }] };
}

function refuse(response: ServerResponse, error: unknown, logger: Logger, requestId: string): void {
  let status = 500;
  let body = errorBody('Internal server error', 'INTERNAL_SERVER_ERROR');
  if (error instanceof MethodNotAllowed) {
    status = 405;
    response.setHeader('allow', error.allow);
    body = errorBody(error.message, 'METHOD_NOT_ALLOWED');
  } else if (error instanceof AppError) {
    status = STATUS_OF[error.code];
    body = errorBody(error.message, error.code, error.details);
    if (error.code === 'UNAUTHENTICATED') response.setHeader('www-authenticate', 'Bearer');
  } else {
    logger.error({ err: error, requestId }, 'the chat endpoint failed');
  }
  response.statusCode = status;
  response.setHeader('content-type', 'application/json; charset=utf-8');
  response.end(JSON.stringify(body));
}
