import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { checkOutboundUrl, createOutboundFetch, guardedLookup, isPublicAddress, parseAllowedHosts, type Resolver } from './outbound-address';

describe('the outbound address rule', () => {
  it('lets only public unicast addresses through', () => {
    for (const address of ['8.8.8.8', '2001:4860:4860::8888']) expect(isPublicAddress(address)).toBe(true);
    for (const address of ['127.0.0.1', '10.0.0.1', '172.16.5.4', '192.168.1.1', '169.254.169.254', '0.0.0.0', '100.64.0.1', '::1', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', 'not an address']) {
      expect(isPublicAddress(address)).toBe(false);
    }
  });

  it('refuses other schemes, credentials in the URL and literal non-public addresses unless allowed', () => {
    expect(checkOutboundUrl('ftp://example.com/', [])).toEqual({ ok: false, reason: 'must use http or https' });
    expect(checkOutboundUrl('http://user:pw@example.com/', [])).toEqual({ ok: false, reason: 'must not carry credentials' });
    expect(checkOutboundUrl('not a url', []).ok).toBe(false);
    expect(checkOutboundUrl('http://[::1]:8080/mcp', []).ok).toBe(false);
    expect(checkOutboundUrl('http://[::1]:8080/mcp', ['::1']).ok).toBe(true);
    expect(checkOutboundUrl('http://127.0.0.1/', ['127.0.0.1']).ok).toBe(true);
    // A host name is judged when it connects, by what it resolves to.
    expect(checkOutboundUrl('https://localhost/', []).ok).toBe(true);
  });

  it('parses WEBHOOK_ALLOWED_HOSTS', () => {
    expect(parseAllowedHosts(' Mcp.Internal , [::1],,127.0.0.1 ')).toEqual(['mcp.internal', '::1', '127.0.0.1']);
    expect(parseAllowedHosts(undefined)).toEqual([]);
  });

  it('judges every connection by its own look-up, so a name that turns private is refused (DNS rebinding)', async () => {
    const answers = [[{ address: '93.184.216.34', family: 4 }], [{ address: '127.0.0.1', family: 4 }], [{ address: '93.184.216.34', family: 4 }, { address: '10.0.0.7', family: 4 }]];
    const resolve: Resolver = (_host, callback) => callback(null, answers.shift()!);
    const lookup = guardedLookup(resolve);
    const ask = () =>
      new Promise<{ error: Error | null; address: unknown }>((done) => {
        lookup('rebind.example', { all: true }, (error: NodeJS.ErrnoException | null, address: unknown) => done({ error, address }));
      });
    expect(await ask()).toEqual({ error: null, address: [{ address: '93.184.216.34', family: 4 }] });
    expect((await ask()).error?.message).toMatch(/^rebind\.example resolves to the non-public address 127\.0\.0\.1/);
    expect((await ask()).error?.message).toMatch(/non-public address 10\.0\.0\.7/);
  });

  it('never follows a redirect, so a public target cannot send the request on to a refused one', async () => {
    let hits = 0;
    const server = http.createServer((req, res) => {
      hits += 1;
      res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data' }).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const outbound = createOutboundFetch({ allowedHosts: ['127.0.0.1'] });
    try {
      const response = await outbound.fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      expect(response.status).toBe(302);
      expect(hits).toBe(1);
      await expect(outbound.fetch('http://169.254.169.254/latest/meta-data')).rejects.toThrow(/non-public address 169\.254\.169\.254/);
    } finally {
      await outbound.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('refuses a host name resolving to loopback when it is not allowed, and reaches it when it is', async () => {
    const server = http.createServer((_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://localhost:${(server.address() as AddressInfo).port}/`;
    const refused = createOutboundFetch({ allowedHosts: [], resolve: (_host, callback) => callback(null, [{ address: '127.0.0.1', family: 4 }]) });
    const allowed = createOutboundFetch({ allowedHosts: ['localhost'], resolve: (_host, callback) => callback(null, [{ address: '127.0.0.1', family: 4 }]) });
    try {
      await expect(refused.fetch(url)).rejects.toMatchObject({ cause: { message: expect.stringMatching(/^localhost resolves to the non-public address 127\.0\.0\.1/) } });
      expect(await (await allowed.fetch(url)).text()).toBe('ok');
    } finally {
      await refused.close();
      await allowed.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
