// The chat page served by copilot-bridge (`--serve`): a prompt box, the
// streamed reply, each tool call as it starts and ends, permission prompts
// as an allow/deny dialog, and a tool of the page's own. It reaches the CLI
// through the bridge's WebSocket with the token the bridge printed (in this
// address's fragment, which is never sent to a server).
//
// With the bridge's --offline, each prompt first scripts the scripted
// model's replies for this page's session (`?script=demo|tool|plain`;
// demo: the page's tool, then two shell commands, then a reply).

import { CopilotClient } from "../src/index.js";

const MODEL = "claude-sonnet-4.5";
const $ = (id) => document.getElementById(id);
const transcript = $("transcript");
const status = $("status");

function setStatus(text, state) {
  status.textContent = text;
  status.dataset.state = state;
  document.body.dataset.state = state;
}

function add(className, text) {
  const el = document.createElement("div");
  el.className = className;
  el.textContent = text;
  transcript.append(el);
  el.scrollIntoView({ block: "end" });
  return el;
}

/** The bridge's token: from the fragment (then hidden), or kept for reloads. */
function takeToken() {
  const fromHash = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromHash) {
    sessionStorage.setItem("copilot-bridge-token", fromHash);
    history.replaceState(null, "", location.pathname + location.search);
    return fromHash;
  }
  return sessionStorage.getItem("copilot-bridge-token");
}

/** The page's own tool: the agent calls it, this page runs it. */
const rollDie = {
  name: "roll_die",
  description: "Roll a fair die with the given number of sides (run in the user's browser).",
  parameters: { type: "object", properties: { sides: { type: "integer", minimum: 2 } }, required: ["sides"] },
  skipPermission: true,
  handler: ({ sides = 6 } = {}) => {
    const n = Math.max(2, Number(sides) || 6);
    const roll = (crypto.getRandomValues(new Uint32Array(1))[0] % n) + 1;
    return `The die shows ${roll}.`;
  },
};

/** Asks in a dialog; resolves with the decision. */
function askPermission(request) {
  const p = request.permissionRequest ?? {};
  const dialog = $("permission");
  $("permission-kind").textContent = `The agent asks for ${request.kind ?? "a tool"} permission${p.intention ? `: ${p.intention}` : ""}.`;
  $("permission-detail").textContent = p.fullCommandText ?? p.toolName ?? JSON.stringify(p, null, 2);
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        const allowed = dialog.returnValue === "allow";
        add("decision", `${allowed ? "Allowed" : "Denied"}: ${p.fullCommandText ?? p.toolName ?? request.kind}`);
        resolve(allowed ? { kind: "approve-once" } : { kind: "reject", feedback: "The user denied it in the page." });
      },
      { once: true },
    );
    dialog.showModal();
  });
}

/** The scripted model's replies for one prompt (offline only). */
function offlineScript(kind, prompt) {
  const bash = (command, description) => ({ toolCalls: [{ name: "bash", arguments: { command, description } }] });
  const roll = { name: "roll_die", arguments: { sides: 6 } };
  const done = `You said: “${prompt}”. This reply is scripted: the Copilot CLI runs against a scripted model on this machine.`;
  switch (kind) {
    case "plain":
      return [{ text: done }];
    case "tool":
      return [{ text: "Let me roll the die. ", toolCalls: [roll] }, { text: done }];
    default:
      return [
        { text: "Let me roll the die first. ", toolCalls: [roll] },
        bash("echo Hello from the shell", "Greet from the shell"),
        bash("echo A second command", "Run a second command"),
        { text: done },
      ];
  }
}

async function main() {
  const token = takeToken();
  if (!token) {
    setStatus("no token: open the address copilot-bridge printed", "error");
    return;
  }
  const info = await (await fetch("/bridge.json")).json();
  const script = new URLSearchParams(location.search).get("script") ?? "demo";
  const started = performance.now();
  const client = await CopilotClient.connectWebSocket(`ws://${location.host}/ws`, { token });
  const session = await client.createSession({ model: MODEL, streaming: true, onPermission: askPermission, tools: [rollDie] });
  window.copilotChat = { client, session };
  setStatus(
    `connected to Copilot CLI ${client.serverInfo.version ?? "?"} in ${Math.round(performance.now() - started)} ms` +
      (info.offline ? " (offline: scripted model)" : ""),
    "ready",
  );
  client.on("disconnect", (reason) => setStatus(`disconnected: ${reason}`, "error"));
  // A dropped socket is opened again and the session resumed (autoReconnect).
  client.onRecovery((step) => {
    if (step.type === "connectionLost") status.textContent = "connection lost: reconnecting…";
    else if (step.type === "recovered") status.textContent = `reconnected in ${Math.round(step.tookMs)} ms`;
  });

  const bubbles = new Map();
  const tools = new Map();
  session.on((e) => {
    const d = e.data ?? {};
    switch (e.type) {
      case "assistant.message_delta":
        if (d.parentToolCallId) break;
        if (!bubbles.has(d.messageId)) bubbles.set(d.messageId, add("assistant", ""));
        bubbles.get(d.messageId).textContent += d.deltaContent ?? "";
        break;
      case "assistant.message":
        if (d.parentToolCallId || !d.content) break;
        if (!bubbles.has(d.messageId)) bubbles.set(d.messageId, add("assistant", ""));
        bubbles.get(d.messageId).textContent = d.content;
        break;
      case "tool.execution_start": {
        const args = d.arguments === undefined ? "" : ` ${JSON.stringify(d.arguments)}`;
        const el = add("tool", `▶ ${d.toolName}${args}`);
        el.dataset.state = "running";
        el.dataset.tool = d.toolName;
        tools.set(d.toolCallId, el);
        break;
      }
      case "tool.execution_complete": {
        const el = tools.get(d.toolCallId) ?? add("tool", "");
        const text = (d.result?.content ?? d.error?.message ?? "").trim();
        el.dataset.state = d.success ? "done" : "failed";
        el.textContent += `\n${d.success ? "✓" : "✗"} ${text}`;
        break;
      }
      case "session.error":
        add("error", `${d.errorType ?? "error"}: ${d.message ?? ""}`);
        break;
    }
  });

  const form = $("prompt-form");
  const input = $("prompt");
  const send = $("send");
  input.disabled = send.disabled = false;
  input.value = "Roll a die for me, then greet me from the shell.";
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const prompt = input.value.trim();
    if (!prompt) return;
    input.disabled = send.disabled = true;
    add("user", prompt);
    setStatus("working…", "busy");
    try {
      if (info.offline) {
        const r = await fetch("/offline/script", {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ sessionId: session.id, replies: offlineScript(script, prompt) }),
        });
        if (!r.ok) throw new Error(`the bridge refused the script: ${r.status}`);
      }
      const t0 = performance.now();
      await session.sendAndWait(prompt, { timeoutMs: 300_000 });
      const ms = performance.now() - t0;
      const el = add("turn-time", `turn complete in ${ms.toFixed(0)} ms`);
      el.dataset.ms = String(ms);
      setStatus("ready", "ready");
    } catch (e) {
      add("error", String(e?.message ?? e));
      setStatus("the turn failed", "error");
    } finally {
      input.disabled = send.disabled = false;
      input.value = "";
      input.focus();
    }
  });
}

main().catch((e) => {
  add("error", String(e?.message ?? e));
  setStatus(`cannot connect: ${e?.message ?? e}`, "error");
});
