import { Arg, Authorized, Ctx, FieldResolver, Int, Mutation, Query, Resolver, Root } from 'type-graphql';
import { checkPage, MAX_PAGE_SIZE } from '../db/record-rules';
import { Role } from '../auth/roles';
import { LlmConfiguration } from '../configurations/configuration.types';
import type { GraphQLContext } from '../graphql/context';
import { ConfigurationRelease, toConfigurationRelease } from './release.types';

/** Releases a configuration's `releases` lists when the client does not say. */
const DEFAULT_RELEASE_PAGE = 20;

@Resolver(() => LlmConfiguration)
export class ConfigurationReleaseResolver {
  @Authorized(Role.EDITOR)
  @Mutation(() => ConfigurationRelease, {
    description:
      'Freezes the configuration\'s effective system prompt, call options, model, skills and the versions of the snippets composed into it under a label (1–64 letters, digits, "-", "_", "."; stored in lower case). Publishing a label again moves it to a new release; older releases stay readable. Publishing an unchanged configuration under the label it already has answers that release.',
  })
  async publishConfiguration(
    @Ctx() { services, caller }: GraphQLContext,
    @Arg('identifier') identifier: string,
    @Arg('label') label: string,
  ): Promise<ConfigurationRelease> {
    return toConfigurationRelease(await services.releases.publish(identifier, label, caller?.name ?? null));
  }

  @Authorized(Role.VIEWER)
  @Query(() => ConfigurationRelease, { nullable: true, description: 'The release a label of a configuration means now; null when the configuration or the label is unknown.' })
  async configurationRelease(@Ctx() { services }: GraphQLContext, @Arg('identifier') identifier: string, @Arg('label') label: string): Promise<ConfigurationRelease | null> {
    const release = await services.releases.current(identifier, label);
    return release ? toConfigurationRelease(release) : null;
  }

  @FieldResolver(() => [ConfigurationRelease], {
    description: `The configuration's releases, newest first (a label means its newest one): the newest \`limit\` (default ${DEFAULT_RELEASE_PAGE}, at most ${MAX_PAGE_SIZE}).`,
  })
  async releases(
    @Root() configuration: LlmConfiguration,
    @Ctx() { loaders }: GraphQLContext,
    @Arg('limit', () => Int, { nullable: true, defaultValue: DEFAULT_RELEASE_PAGE }) limit: number | null = DEFAULT_RELEASE_PAGE,
  ): Promise<ConfigurationRelease[]> {
    const page = checkPage({ limit: limit ?? DEFAULT_RELEASE_PAGE, offset: 0 });
    return (await loaders.releasesByConfigurationUid.load(configuration.uid)).slice(0, page.limit).map(toConfigurationRelease);
  }
}
