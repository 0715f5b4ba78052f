import { Authorized, Resolver, Root, Subscription, type SubscribeResolverData } from 'type-graphql';
import { Role } from '../auth/roles';
import type { GraphQLContext } from '../graphql/context';
import { UnauthenticatedError } from '../shared/errors';
import { eventStream } from './event-stream';
import type { PromptChangeEvent } from './prompt-event-bus';
import { PromptChangeEventView } from './prompt-history.types';

@Resolver()
export class PromptHistoryResolver {
  @Authorized(Role.VIEWER)
  @Subscription(() => PromptChangeEventView, {
    description: 'Every snippet, configuration or skill change from now on, through the API or written by TYPO3 in the tables, with the configurations it affects.',
    subscribe: ({ context }: SubscribeResolverData<unknown, Record<string, never>, GraphQLContext>) => {
      if (!context.caller) throw new UnauthenticatedError('Authentication required');
      return eventStream<PromptChangeEvent>((push) => context.services.history.subscribe(push));
    },
  })
  promptChanged(@Root() event: PromptChangeEvent): PromptChangeEventView {
    return { ...event, at: new Date(event.at) };
  }
}
