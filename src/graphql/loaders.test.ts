import type { Services } from '../services';
import { createLoaders } from './loaders';

/** Services whose every method records its call and answers an empty list. */
function recordingServices(calls: string[]): Services {
  return new Proxy({} as Services, {
    get: (_target, service) =>
      new Proxy(
        {},
        {
          get: (_service, method) =>
            method === 'store'
              ? { provenanceOf: async () => (calls.push('runs.store.provenanceOf'), new Map()) }
              : async () => {
                  calls.push(`${String(service)}.${String(method)}`);
                  return method === 'skillsByConfiguration' || method === 'versionsOf' ? new Map() : [];
                },
        },
      ),
  });
}

describe('a request\'s loaders', () => {
  test('are made on first use, and each is one loader for the whole request (so its loads are batched)', async () => {
    const calls: string[] = [];
    const loaders = createLoaders(recordingServices(calls));
    expect(loaders.modelByUid).toBe(loaders.modelByUid);
    expect(loaders.versionsByUid).toBe(loaders.versionsByUid);
    expect(loaders.versionsByUid.snippet).toBe(loaders.versionsByUid.snippet);
    const [a, b] = await Promise.all([loaders.modelByUid.load(1), loaders.modelByUid.load(2)]);
    expect([a, b]).toEqual([null, null]);
    expect(calls).toEqual(['models.findByUids']);
  });

  test('read the active snippets and the library once per request', async () => {
    const calls: string[] = [];
    const loaders = createLoaders(recordingServices(calls));
    await Promise.all([loaders.activeSnippets(), loaders.activeSnippets(), loaders.library(), loaders.library()]);
    expect(calls.sort()).toEqual(['library.get', 'snippets.allActive']);
  });

  test('build one view per snippet row and one list per selection', () => {
    const loaders = createLoaders(recordingServices([]));
    const row = { uid: 1, identifier: 'persona', name: 'Persona', tags: 'persona', metadata: null } as never;
    const selection = [row];
    expect(loaders.snippetView(row)).toBe(loaders.snippetView(row));
    expect(loaders.snippetViews(selection)).toBe(loaders.snippetViews(selection));
    expect(loaders.snippetViews(selection)[0]).toBe(loaders.snippetView(row));
  });

  test('hold next to nothing until used: a subscription keeps its context for as long as it lasts', () => {
    const loaders = createLoaders(recordingServices([])) as unknown as Record<string, unknown>;
    const made = Object.values(loaders).filter((value) => value !== undefined && value !== null && typeof value === 'object');
    // Only the services it was given; no DataLoader, map or cache yet.
    expect(made).toHaveLength(1);
  });
});
