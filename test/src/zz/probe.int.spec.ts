import { readFileSync } from 'node:fs';
import { startTestStack, type TestStack } from '../support/test-stack';
let stack: TestStack;
const ticks = (pid: string) => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' '); return +f[11]! + +f[12]!; };
const busy = () => { const l = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.split(/\s+/).slice(1).map(Number); return l[0]! + l[1]! + l[2]! + l[5]! + l[6]!; };
beforeAll(async () => { stack = await startTestStack('probe'); }, 60_000);
afterAll(async () => { await stack?.stop(); });
it('idles', async () => {
  await new Promise((r) => setTimeout(r, 2000));
  const u0 = process.cpuUsage(); const b0 = busy(); const n0 = ticks(process.env.NATS_PID!);
  await new Promise((r) => setTimeout(r, 10_000));
  const u = process.cpuUsage(u0);
  console.log(`idle 10 s: process ${(u.user + u.system) / 1000} ms, machine ${(busy() - b0) * 10} ms, nats ${(ticks(process.env.NATS_PID!) - n0) * 10} ms`);
  expect(stack).toBeDefined();
}, 30_000);
