import { checkEnvReference, readEnvReference, type CredentialEnvironment } from './env-reference';

const environment: CredentialEnvironment = {
  readEnv: (name) => ({ PROMPTWIRE_PROVIDER_KEY_A: 'a-value', LISTED: 'listed-value', SECRET_KEY: 'service-secret', PROMPTWIRE_PROVIDER_KEY_EMPTY: '' })[name],
  providerKeyEnvAllowed: (name) => name.startsWith('PROMPTWIRE_PROVIDER_KEY_') || name === 'LISTED',
};

describe('env:NAME credentials', () => {
  it('reads only allowed variables', () => {
    expect(readEnvReference('env:PROMPTWIRE_PROVIDER_KEY_A', environment)).toEqual({ ok: true, value: 'a-value' });
    expect(readEnvReference('env:LISTED', environment)).toEqual({ ok: true, value: 'listed-value' });
    expect(readEnvReference('env:SECRET_KEY', environment)).toEqual({ ok: false, reason: 'not-allowed' });
    expect(readEnvReference('env:PROMPTWIRE_PROVIDER_KEY_EMPTY', environment)).toEqual({ ok: false, reason: 'unset' });
    expect(readEnvReference('env:PROMPTWIRE_PROVIDER_KEY_NONE', environment)).toEqual({ ok: false, reason: 'unset' });
    expect(readEnvReference('env:bad name', environment)).toEqual({ ok: false, reason: 'not-allowed' });
  });

  it('refuses a written name that is malformed or not allowed, naming the field', () => {
    expect(() => checkEnvReference('env:LISTED', environment, 'credential')).not.toThrow();
    expect(() => checkEnvReference('env:SECRET_KEY', environment, 'credential')).toThrow(expect.objectContaining({ code: 'BAD_USER_INPUT', field: 'credential', message: expect.stringContaining('PROVIDER_KEY_ENV_ALLOW') }));
    expect(() => checkEnvReference('env:1X', environment, 'apiKey')).toThrow(expect.objectContaining({ code: 'BAD_USER_INPUT', field: 'apiKey' }));
  });
});
