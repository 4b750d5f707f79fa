// Drives a real @ag-ui/client HttpAgent against `tether serve`: runs the given user messages
// one after another on one thread, and prints the agent's messages after each run as JSON
// lines ({"run": i, "streamed": [ids the run's text messages and tool results streamed
// under], "messages": [{id, role, content, toolCalls}]}).
// Usage: node agui_client.mjs URL THREAD TEXT...   (NODE_PATH points at its node_modules)
import { createRequire } from "node:module";
const require = createRequire(process.env.AGUI_MODULES + "/");
const { HttpAgent } = require("@ag-ui/client");

const [url, threadId, ...texts] = process.argv.slice(2);
const agent = new HttpAgent({ url, threadId, headers: JSON.parse(process.env.AGUI_HEADERS || "{}") });
let i = 0;
for (const text of texts) {
  i += 1;
  agent.addMessage({ id: `client-user-${i}`, role: "user", content: text });
  const streamed = [];
  await agent.runAgent({ runId: `run-${i}` }, {
    onTextMessageStartEvent: ({ event }) => { streamed.push(event.messageId); },
    onToolCallResultEvent: ({ event }) => { streamed.push(event.messageId); },
  });
  const messages = agent.messages.map((m) => ({
    id: m.id, role: m.role, content: m.content ?? null,
    toolCalls: (m.toolCalls ?? []).map((c) => c.id),
  }));
  console.log(JSON.stringify({ run: i, streamed, messages }));
}
