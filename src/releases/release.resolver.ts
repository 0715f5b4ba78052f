import { Arg, Authorized, Ctx, FieldResolver, Mutation, Query, Resolver, Root } from 'type-graphql';
import { Role } from '../auth/roles';
import { LlmConfiguration } from '../configurations/configuration.types';
import type { GraphQLContext } from '../graphql/context';
import { ConfigurationRelease, toConfigurationRelease } from './release.types';

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

  @FieldResolver(() => [ConfigurationRelease], { description: 'Every release of the configuration, newest first; a label means its newest one.' })
  async releases(@Root() configuration: LlmConfiguration, @Ctx() { loaders }: GraphQLContext): Promise<ConfigurationRelease[]> {
    return (await loaders.releasesByConfigurationUid.load(configuration.uid)).map(toConfigurationRelease);
  }
}
