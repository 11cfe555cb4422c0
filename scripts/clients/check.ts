// Uses the TypeScript types openapi-typescript generates from openapi/openapi.json against a
// running gateway (scripts/check-clients.sh compiles it with tsc --strict, then runs it with
// node): the types must fit what the gateway answers.
import type { components, paths } from "./lockgate";

// Node globals, declared here so that no @types package is needed.
declare const process: { argv: string[]; exit(code: number): never };

type AcquireBody = components["schemas"]["AcquireBody"];
type Grant = paths["/locks/{name}"]["post"]["responses"]["201"]["content"]["application/json"];
type Info = paths["/locks/{name}"]["get"]["responses"]["200"]["content"]["application/json"];
type Page = paths["/locks"]["get"]["responses"]["200"]["content"]["application/json"];
type HoldEvent = components["schemas"]["HoldEvent"];
type Problem = components["schemas"]["Problem"];
type LockEvent = components["schemas"]["LockEventBody"];
type SemaphoreBody = components["schemas"]["SemaphoreAcquireBody"];
type SemaphoreInfo = paths["/semaphores/{name}"]["get"]["responses"]["200"]["content"]["application/json"];

const [base, key] = process.argv.slice(2);
const auth = { authorization: `Bearer ${key}` };

function check(ok: boolean, what: unknown): void {
  if (!ok) throw new Error(JSON.stringify(what));
}

async function main(): Promise<void> {
  const body: AcquireBody = { ttl_ms: 10_000, owner: "ts-worker", metadata: { addr: "10.0.0.9:80" } };
  const taken = await fetch(`${base}/locks/gen:ts`, { method: "POST", headers: auth, body: JSON.stringify(body) });
  check(taken.status === 201, taken.status);
  const grant = (await taken.json()) as Grant;
  const held = await fetch(`${base}/locks/gen:ts`, { method: "POST", headers: auth });
  const problem = (await held.json()) as Problem;
  check(problem.type.endsWith("/lock-held"), problem);
  const info = (await (await fetch(`${base}/locks/gen:ts`, { headers: auth })).json()) as Info;
  check(info.owner === "ts-worker" && info.fence === grant.fence, info);
  const page = (await (await fetch(`${base}/locks?prefix=gen:`, { headers: auth })).json()) as Page;
  check(page.locks.some((lock) => lock.name === "gen:ts"), page);
  const released = await fetch(`${base}/locks/gen:ts`, { method: "DELETE", headers: { ...auth, "lock-token": grant.token } });
  check(released.status === 204, released.status);

  const hold = await fetch(`${base}/locks/gen:ts-held/hold`, { method: "POST", headers: auth, body: '{"ttl_ms": 3000}' });
  const reader = hold.body!.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  const first = JSON.parse(text.split("\n")[0]) as HoldEvent;
  check(first.event === "acquired" && typeof first.token === "string", first);
  await reader.cancel();

  // The event stream as Server-Sent Events: the first event is the lock's state.
  const events = await fetch(`${base}/locks/gen:ts-watched/events`, { headers: auth });
  check(events.headers.get("content-type") === "text/event-stream", events.headers.get("content-type"));
  const sse = events.body!.getReader();
  let block = "";
  while (!block.includes("\n\n")) {
    const { value, done } = await sse.read();
    if (done) break;
    block += new TextDecoder().decode(value);
  }
  const data = block.split("\n").find((line) => line.startsWith("data: "))!.slice("data: ".length);
  const state = JSON.parse(data) as LockEvent;
  check(state.event === "state" && state.held === false, state);
  await sse.cancel();

  // A semaphore of two permits: `permits` is required by the type.
  const permitBody: SemaphoreBody = { permits: 2, owner: "ts-pool" };
  const permit = await fetch(`${base}/semaphores/gen:ts-pool`, { method: "POST", headers: auth, body: JSON.stringify(permitBody) });
  check(permit.status === 201, permit.status);
  const permitGrant = (await permit.json()) as Grant;
  const pool = (await (await fetch(`${base}/semaphores/gen:ts-pool`, { headers: auth })).json()) as SemaphoreInfo;
  check(pool.permits === 2 && pool.in_use === 1 && pool.holders[0].owner === "ts-pool", pool);
  const given = await fetch(`${base}/semaphores/gen:ts-pool`, { method: "DELETE", headers: { ...auth, "lock-token": permitGrant.token } });
  check(given.status === 204, given.status);
  console.log("typescript client: acquire with owner, lock-held, inspect, list, release, hold stream, event stream, semaphore: ok");
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
