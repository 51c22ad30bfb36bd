// The browser entry point ("copilot-wasm/browser", types/index.d.ts) used as
// the README's browser section and chat/ use it. Checked by `npm run
// typecheck`, never run.

import * as browserEntry from "copilot-wasm/browser";
import * as nodeEntry from "copilot-wasm";
import { CopilotClient, loadWasm, DisconnectedError, type SessionEvent, type rpc } from "copilot-wasm/browser";

export async function browser(token: string, wasm: Response): Promise<void> {
  await loadWasm(wasm);
  const client = await CopilotClient.connectWebSocket(`ws://${location.host}/ws`, { token, requestTimeoutMs: 60_000 });
  const session = await client.createSession({ model: "gpt-5", streaming: true, onPermission: () => "approve-once" });
  const output = document.createElement("pre");
  session.on("assistant.message_delta", (e) => output.append(e.data.deltaContent));
  session.on("session.idle", () => output.append("\n"));
  try {
    await session.sendAndWait("Hello");
  } catch (e) {
    if (!(e instanceof DisconnectedError)) throw e;
  }
  const history: SessionEvent[] = await session.getMessages();
  const current: rpc.CurrentModel = await session.rpc.model.getCurrent();
  console.log(history.length, current);
  await client.stop({ graceMs: 1000 });
}

export async function streams(readable: ReadableStream<Uint8Array>, writable: WritableStream<Uint8Array>): Promise<void> {
  const client = await CopilotClient.fromStreams(readable, writable, { token: "t" });
  console.log(client.serverInfo.protocolVersion, client.closed);
  // @ts-expect-error: connectWebSocket takes the URL first
  await CopilotClient.connectWebSocket({ token: "t" });
}

// Every value the browser entry exports, the Node entry exports too (src/node.js
// re-exports src/index.js): a name missing from node.d.ts fails here.
type MissingFromNode = Exclude<keyof typeof browserEntry, keyof typeof nodeEntry>;
export const nodeExportsAll: [MissingFromNode] extends [never] ? true : MissingFromNode = true;
