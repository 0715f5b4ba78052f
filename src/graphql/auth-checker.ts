import type { AuthChecker } from 'type-graphql';
import { Role, roleAtLeast } from '../auth/roles';
import { ForbiddenError, UnauthenticatedError } from '../shared/errors';
import type { GraphQLContext } from './context';

/** `@Authorized(Role.X)` means "at least X": ADMIN > EDITOR > VIEWER. */
export const authChecker: AuthChecker<GraphQLContext, Role> = ({ context }, roles) => {
  const caller = context.caller;
  if (!caller) {
    throw new UnauthenticatedError(context.authProblem ?? 'Authentication required: send "Authorization: Bearer <token>"');
  }
  const required = roles[0] ?? Role.VIEWER;
  if (!roleAtLeast(caller.role, required)) {
    throw new ForbiddenError(`This operation needs the ${required} role; your token has ${caller.role}`);
  }
  return true;
};
