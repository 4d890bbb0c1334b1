// A TypeScript program using the client generated from the OpenAPI
// document: it submits a run to the runner at BATON_API_URL and reads its
// status until it has ended. internal/apicheck runs it against a real
// runner; tsc checks it against the generated types first.
import createClient from "openapi-fetch";
import type { paths } from "./gen/baton.js";

const base = process.env.BATON_API_URL;
if (!base) throw new Error("BATON_API_URL is not set");
const api = createClient<paths>({ baseUrl: base });

const id = `ts-${Date.now()}`;
const sub = await api.POST("/v1/runs", {
  body: { id, nodes: [{ id: "a", kind: "noop" }, { id: "b", kind: "noop", deps: ["a"] }] },
});
if (sub.error || sub.response.status !== 201) {
  throw new Error(`submit: ${sub.response.status} ${JSON.stringify(sub.error)}`);
}
console.log(`submitted ${sub.data.id}: ${sub.data.status}`);

const ended = new Set(["SUCCEEDED", "FAILED", "CANCELLED"]);
const deadline = Date.now() + 20_000;
for (;;) {
  const got = await api.GET("/v1/runs/{id}", { params: { path: { id } } });
  if (got.error) throw new Error(`status: ${got.response.status} ${got.error.error}`);
  const run = got.data;
  if (ended.has(run.status)) {
    console.log(`run ${run.id} ${run.status}: ${run.nodes.map((n) => `${n.id}=${n.state}`).join(" ")}`);
    if (run.status !== "SUCCEEDED") process.exit(1);
    break;
  }
  if (Date.now() > deadline) throw new Error(`run ${id} still ${run.status} after 20 s`);
  await new Promise((r) => setTimeout(r, 50));
}

// A bad id is refused with 400 naming the field, typed as the document's Error.
const bad = await api.GET("/v1/runs/{id}", { params: { path: { id: "a b" } } });
if (bad.response.status !== 400 || bad.error?.problems?.[0]?.field !== "path.id") {
  throw new Error(`bad id: ${bad.response.status} ${JSON.stringify(bad.error)}`);
}
console.log(`bad id refused: ${bad.error.error}`);
