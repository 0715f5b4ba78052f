/**
 * A stand-in OTLP/HTTP collector in its own process (as a real collector is):
 * accepts every export, keeps only counts. Prints `READY <url>`; on a
 * `counts` IPC message answers `{ requests, bytes }`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

let requests = 0;
let bytes = 0;
const server = http.createServer((request, response) => {
  request.on('data', (chunk: Buffer) => (bytes += chunk.length));
  request.on('end', () => {
    requests += 1;
    response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
  });
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`READY http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
});
process.on('message', (message: { type?: string }) => {
  if (message.type === 'counts') process.send?.({ type: 'counts', requests, bytes });
  if (message.type === 'exit') server.close(() => process.exit(0));
});
